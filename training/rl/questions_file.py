"""An RL run's questions from a JSONL file (``manage.py train_rl --questions-file``), for a run that reads no
database: one question a line, the fields of ``RLQuestion``::

    {"id": 7, "question": "Who won the 2022 AFL Grand Final?",
     "references": [[{"title": "2022 AFL Grand Final", "url": "https://en.wikipedia.org/wiki/2022_AFL_Grand_Final",
                      "domain": "en.wikipedia.org", "extract": "Geelong defeated Sydney by 81 points."}]],
     "reference_answers": ["Geelong"]}

``question`` is required; ``id`` (a whole number, unique; default the line number) names the question in
the episodes; ``references`` are quote sets (lists of quotes as answers store them, a missing quote field
empty), each the prompt of answer-only episodes; ``reference_answers`` the short answers a browsing
episode's browser is given. Any other field is refused, as a misspelt one would be silently ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from annotation.exports.formats import stored_quotes
from training.rl.types import RLQuestion

FIELDS = ("id", "question", "references", "reference_answers")
QUOTE_FIELDS = ("title", "url", "domain", "extract")


def read_questions(path: Path) -> list[RLQuestion]:
    """The file's questions, or ValueError naming the line and what is wrong with it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    questions: list[RLQuestion] = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {number}: not JSON ({exc})") from None
            try:
                questions.append(question_from(row, number))
            except ValueError as exc:
                raise ValueError(f"{path} line {number}: {exc}") from None
    if not questions:
        raise ValueError(f"{path}: no questions (one JSON object a line)")
    ids = [question.id for question in questions]
    if len(set(ids)) < len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(
            f"{path}: question ids must be unique, repeated: {', '.join(map(str, repeated[:20]))}"
        )
    return questions


def question_from(row: Any, number: int) -> RLQuestion:
    if not isinstance(row, dict):
        raise ValueError("expected a JSON object")
    unknown = sorted(str(name) for name in row if name not in FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} (fields: {', '.join(FIELDS)})")
    text = row.get("question")
    if not isinstance(text, str) or not text.strip():
        raise ValueError('"question": expected the question\'s text')
    pk = row.get("id", number)
    if isinstance(pk, bool) or not isinstance(pk, int):
        raise ValueError('"id": expected a whole number')
    references = row.get("references", [])
    if not isinstance(references, list) or not all(isinstance(quotes, list) for quotes in references):
        raise ValueError('"references": expected a list of quote lists')
    for quotes in references:
        for quote in quotes:
            if not isinstance(quote, dict) or not all(
                isinstance(quote.get(k, ""), str) for k in QUOTE_FIELDS
            ):
                raise ValueError(f'"references": a quote is an object of strings ({", ".join(QUOTE_FIELDS)})')
    answers = row.get("reference_answers", [])
    if not isinstance(answers, list) or not all(isinstance(answer, str) for answer in answers):
        raise ValueError('"reference_answers": expected a list of strings')
    return RLQuestion(
        id=pk,
        text=text.strip(),
        references=tuple(dict.fromkeys(stored_quotes(quotes) for quotes in references if quotes)),
        reference_answers=tuple(answers),
    )
