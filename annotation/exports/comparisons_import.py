"""Importing the public WebGPT comparisons format: raw ``[record_0, record_1]`` lines or flattened
``quotes_0/answer_0/score_0`` rows (JSONL). Questions and answers go into the bank; judgements are kept
apart from the platform's own labels. All or nothing; re-importing the same rows adds nothing."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.models import Answer, ImportedComparison, Question, SourceKind
from annotation.questions.formats import QuestionFileError, decode, json_object
from annotation.questions.splits import assign_split, question_key
from webgpt_site.models import log_action

_TITLE = re.compile(r"^(?P<title>.*) \((?P<domain>[^()\s]+)\)$")


def _quotes(value: Any, line: int) -> list[dict[str, str]]:
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("title"), list)
        or not isinstance(value.get("extract"), list)
    ):
        raise QuestionFileError(line, "quotes must be {title: [...], extract: [...]}")
    if len(value["title"]) != len(value["extract"]):
        raise QuestionFileError(line, "quotes have different numbers of titles and extracts")
    quotes = []
    for title, extract in zip(value["title"], value["extract"], strict=True):
        match = _TITLE.match(str(title))
        quotes.append(
            {
                "title": match["title"] if match else str(title),
                "url": "",
                "domain": match["domain"] if match else "",
                "extract": str(extract),
            }
        )
    return quotes


def _records(row: Any, line: int) -> tuple[dict, list[tuple[str, list, float]]]:
    """The question and the two (answer, quotes, score) of a raw pair or a flattened row."""
    try:
        if isinstance(row, list) and len(row) == 2:
            question = row[0]["question"]
            sides = [(r["answer"], _quotes(r["quotes"], line), float(r["score"])) for r in row]
        elif isinstance(row, dict):
            question = row["question"]
            sides = [
                (row[f"answer_{i}"], _quotes(row[f"quotes_{i}"], line), float(row[f"score_{i}"]))
                for i in (0, 1)
            ]
        else:
            raise QuestionFileError(line, "expected a [record_0, record_1] pair or a flattened row")
    except (KeyError, TypeError, ValueError) as exc:
        raise QuestionFileError(line, f"missing or malformed field ({exc})") from None
    if not isinstance(question, dict) or not str(question.get("full_text", "")).strip():
        raise QuestionFileError(line, "'question' must have a non-empty 'full_text'")
    if any(not isinstance(answer, str) or not answer.strip() for answer, _, _ in sides):
        raise QuestionFileError(line, "both answers must be non-empty strings")
    if abs(sides[0][2] + sides[1][2]) > 1e-6 or abs(sides[0][2]) > 1:
        raise QuestionFileError(line, "scores must be opposite and within [-1, 1]")
    return question, sides


def import_comparisons(data: bytes, *, source: str, user: Any = None) -> int:
    """Import every comparison of a file; returns how many were new."""
    text = decode(data)
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                value = json_object(line, number)  # raises with the line and reason
            rows.append((number, hashlib.sha256(line.strip().encode()).hexdigest(), *_records(value, number)))
    if not rows:
        raise QuestionFileError(0, "the file holds no comparisons")
    created = 0
    with transaction.atomic():
        known = set(
            ImportedComparison.objects.filter(row_key__in=[r[1] for r in rows]).values_list(
                "row_key", flat=True
            )
        )
        for _number, row_key, question_data, sides in rows:
            if row_key in known:
                continue
            question = _question(question_data)
            answers = [
                Answer.objects.get_or_create(
                    question=question,
                    text=answer,
                    source_kind=SourceKind.MODEL,
                    defaults={"quotes": quotes, "source": {"imported": source}},
                )[0]
                for answer, quotes, _ in sides
            ]
            ImportedComparison.objects.create(
                question=question,
                answer_0=answers[0],
                answer_1=answers[1],
                score_0=sides[0][2],
                source=source,
                row_key=row_key,
            )
            known.add(row_key)
            created += 1
        log_action(user, "comparisons.import", None, source=source, created=created)
    return created


def _question(data: dict) -> Question:
    """The bank's question with this text, or a new one (its id kept unless the dataset already uses it)."""
    text = " ".join(str(data["full_text"]).split())
    key = question_key(text)
    question = Question.objects.filter(key=key).first()
    if question is not None:
        return question
    dataset = str(data.get("dataset") or "webgpt_comparisons")
    external_id = str(data.get("id") or "")
    if external_id and Question.objects.filter(dataset=dataset, external_id=external_id).exists():
        external_id = ""
    return Question.objects.create(
        text=text,
        key=key,
        dataset=dataset,
        external_id=external_id,
        split=assign_split(key, settings.QUESTION_SPLIT_RATIOS),
    )
