"""Answers to judge, from an imported JSONL file or from finished demonstrations."""

from __future__ import annotations

import itertools
import json
from typing import Any, BinaryIO

from django.conf import settings
from django.db import transaction

from annotation.models import Answer, Episode, EpisodeKind, EpisodeStatus, Question, SourceKind
from annotation.questions.formats import MAX_QUESTION_CHARS, QuestionFileError, json_object, read_lines
from annotation.questions.splits import question_key
from browser.engine.text import domain_of
from core.inputs import is_web_url, parse_id
from core.models import log_action
from core.permissions import AnyUser

CHUNK_ROWS = 1000  # rows parsed, matched to their questions and written at a time
# Per field, as for questions (the file's 50 MiB cap alone let one answer be a megabyte that every task page
# then carries): an answer as long as any text a labeler may write; quotes as the browser makes them, with
# room for references quoted by hand.
MAX_ANSWER_CHARS = 20_000
MAX_QUOTES = 100
MAX_QUOTE_CHARS = {"title": 1_000, "url": 2_000, "extract": 10_000}
MAX_SOURCE_CHARS = 20_000  # the source object, as JSON (model name, sampling settings)


def import_answers(source: bytes | BinaryIO, *, user: AnyUser | None = None) -> list[Answer]:
    """Rows ``{question_id | question, answer, quotes: [{title, url, extract}], source: {...}}``.

    All rows or none; a bad row raises QuestionFileError with its line. ``source.kind`` may be
    "model" (default) or "reference"; the rest of ``source`` (model name, sampling settings) is kept.
    A quote's ``url`` is empty or an http(s) address: pages link to it. ``source`` is the file's bytes
    or a binary file (an upload): over ``ANSWERS_IMPORT_MAX_BYTES`` it is refused before it is read, and
    it is read and written a chunk at a time.
    """
    lines = read_lines(source, max_bytes=settings.ANSWERS_IMPORT_MAX_BYTES)
    rows = ((number, _row(line, number)) for number, line in lines if line.strip())
    created: list[Answer] = []
    with transaction.atomic():
        while chunk := list(itertools.islice(rows, CHUNK_ROWS)):
            created += Answer.objects.bulk_create(_answers(chunk))
        if not created:
            raise QuestionFileError(0, "the file holds no answers")
        log_action(user, "answers.import", None, answers=len(created))
    return created


def _answers(rows: list[tuple[int, dict[str, Any]]]) -> list[Answer]:
    """The rows' answers, each with its question from the bank (QuestionFileError naming a row without)."""
    ids = {row["question_id"] for _, row in rows if "question_id" in row}
    keys = {question_key(row["question"]) for _, row in rows if "question" in row}
    by_id = Question.objects.in_bulk(ids)
    by_key = {q.key: q for q in Question.objects.filter(key__in=keys)}
    answers = []
    for number, row in rows:
        question = (
            by_id.get(row["question_id"])
            if "question_id" in row
            else by_key.get(question_key(row["question"]))
        )
        if question is None:
            raise QuestionFileError(number, "the question is not in the bank (import it first)")
        answers.append(
            Answer(
                question=question,
                text=row["answer"],
                quotes=row["quotes"],
                source_kind=row["source"].pop("kind", SourceKind.MODEL),
                source=row["source"],
            )
        )
    return answers


def _row(line: str, number: int) -> dict[str, Any]:
    row = json_object(line, number)
    if "question_id" in row and (
        not isinstance(row["question_id"], int) or parse_id(row["question_id"]) is None
    ):
        raise QuestionFileError(number, "'question_id' must be a question's id (a positive integer)")
    if "question_id" not in row and not (isinstance(row.get("question"), str) and row["question"].strip()):
        raise QuestionFileError(number, "give 'question_id' (an integer) or 'question' (its text)")
    if "question_id" not in row and len(row["question"]) > MAX_QUESTION_CHARS:
        raise QuestionFileError(number, f"'question' is longer than {MAX_QUESTION_CHARS} characters")
    if not isinstance(row.get("answer"), str) or not row["answer"].strip():
        raise QuestionFileError(number, "'answer' must be a non-empty string")
    if len(row["answer"]) > MAX_ANSWER_CHARS:
        raise QuestionFileError(number, f"'answer' is longer than {MAX_ANSWER_CHARS} characters")
    quotes = row.get("quotes", [])
    if not isinstance(quotes, list):
        raise QuestionFileError(number, "'quotes' must be a list")
    if len(quotes) > MAX_QUOTES:
        raise QuestionFileError(number, f"'quotes' holds {len(quotes)} quotes; at most {MAX_QUOTES}")
    cleaned_quotes = []
    for index, quote in enumerate(quotes):
        if not isinstance(quote, dict) or not all(
            isinstance(quote.get(k, ""), str) for k in ("title", "url", "extract")
        ):
            raise QuestionFileError(
                number, f"quote {index} must be an object with text title, url and extract"
            )
        for key, limit in MAX_QUOTE_CHARS.items():
            if len(quote.get(key, "")) > limit:
                raise QuestionFileError(number, f"quote {index}: '{key}' is longer than {limit} characters")
        url = quote.get("url", "")
        if url and not is_web_url(url):
            raise QuestionFileError(number, f"quote {index}: 'url' must be an http:// or https:// address")
        cleaned_quotes.append(
            {
                "title": quote.get("title", ""),
                "url": url,
                "domain": domain_of(url),
                "extract": quote.get("extract", ""),
            }
        )
    source = row.get("source", {})
    if not isinstance(source, dict):
        raise QuestionFileError(number, "'source' must be an object")
    if len(json.dumps(source)) > MAX_SOURCE_CHARS:
        raise QuestionFileError(number, f"'source' is longer than {MAX_SOURCE_CHARS} characters as JSON")
    if source.get("kind", SourceKind.MODEL) not in (SourceKind.MODEL, SourceKind.REFERENCE):
        raise QuestionFileError(number, "'source.kind' must be 'model' or 'reference'")
    cleaned = {"answer": row["answer"].strip(), "quotes": cleaned_quotes, "source": dict(source)}
    if "question_id" in row:
        cleaned["question_id"] = row["question_id"]
    else:
        cleaned["question"] = row["question"]
    return cleaned


def answer_from_episode(episode: Episode) -> Answer:
    """The Answer for a finished episode (created once): a demonstration's, or a model sample's (source
    kind model, naming the policy, the sampling run and the sample's index in it)."""
    if episode.status != EpisodeStatus.FINISHED or not episode.answer:
        raise ValueError("only finished demonstrations with an answer can be judged")
    quotes = [
        {key: quote[key] for key in ("title", "url", "domain", "extract")}
        for quote in episode.state["quotes"]
    ]
    source_kind, source = SourceKind.DEMONSTRATION, {"episode": episode.pk}
    if episode.kind == EpisodeKind.MODEL:
        sample = getattr(episode, "sample", None)
        source_kind = SourceKind.MODEL
        source |= {"policy": episode.policy}
        if sample is not None:
            source |= {"sampling_run": sample.run_id, "sample_index": sample.index}
    answer, _ = Answer.objects.get_or_create(
        episode=episode,
        defaults={
            "question": episode.question,
            "text": episode.answer,
            "quotes": quotes,
            "source_kind": source_kind,
            "source": source,
        },
    )
    return answer
