"""Importing the public WebGPT comparisons format: raw ``[record_0, record_1]`` lines or flattened
``quotes_0/answer_0/score_0`` rows, as JSONL or Parquet. Questions and answers go into the bank; judgements
are kept apart from the platform's own labels. All or nothing; re-importing the same rows adds nothing."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import transaction

from annotation.models import Answer, ImportedComparison, Question, SourceKind
from annotation.questions.formats import QuestionFileError, decode, has_nul, json_object
from annotation.questions.splits import assign_split, question_key
from core.models import log_action

_TITLE = re.compile(r"^(?P<title>.*) \((?P<domain>[^()\s]+)\)$")
CHUNK = 1000  # rows read, checked against the known keys and written at a time
PARQUET_MAGIC = b"PAR1"


class RowError(QuestionFileError):
    """A bad row of a Parquet file, numbered from 1 (Parquet has no lines to name)."""

    def __init__(self, row: int, reason: str) -> None:
        super().__init__(row, reason)
        self.args = (f"row {row}: {reason}" if row else reason,)


Error = type[QuestionFileError]
Rows = Iterable[tuple[int, Any]]  # (line or row number, the row as plain values)


def _quotes(value: Any, number: int, error: Error) -> list[dict[str, str]]:
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("title"), list)
        or not isinstance(value.get("extract"), list)
    ):
        raise error(number, "quotes must be {title: [...], extract: [...]}")
    if len(value["title"]) != len(value["extract"]):
        raise error(number, "quotes have different numbers of titles and extracts")
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


def _records(row: Any, number: int, error: Error) -> tuple[dict, list[tuple[str, list, float]]]:
    """The question and the two (answer, quotes, score) of a raw pair or a flattened row."""
    try:
        if isinstance(row, list) and len(row) == 2:
            question = row[0]["question"]
            sides = [(r["answer"], _quotes(r["quotes"], number, error), float(r["score"])) for r in row]
        elif isinstance(row, dict):
            question = row["question"]
            sides = [
                (row[f"answer_{i}"], _quotes(row[f"quotes_{i}"], number, error), float(row[f"score_{i}"]))
                for i in (0, 1)
            ]
        else:
            raise error(number, "expected a [record_0, record_1] pair or a flattened row")
    except QuestionFileError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise error(number, f"missing or malformed field ({exc})") from None
    if not isinstance(question, dict) or not str(question.get("full_text", "")).strip():
        raise error(number, "'question' must have a non-empty 'full_text'")
    if any(not isinstance(answer, str) or not answer.strip() for answer, _, _ in sides):
        raise error(number, "both answers must be non-empty strings")
    if not (abs(sides[0][2] + sides[1][2]) <= 1e-6 and abs(sides[0][2]) <= 1):  # NaN fails both
        raise error(number, "scores must be opposite and within [-1, 1]")
    # What PostgreSQL would refuse is refused here, where the error can name the row.
    if has_nul(row):
        raise error(number, "text may not contain NUL characters")
    if len(str(question.get("dataset") or "")) > 100 or len(str(question.get("id") or "")) > 200:
        raise error(number, "the question's dataset or id is too long (100 and 200 characters at most)")
    return question, sides


def _row_key(row: Any) -> str:
    """The hash of a row's content, whatever the file's format, key order or spacing. The ``source`` column
    of our exports says where a judgement was made, not what it is, so it is left out: an export of
    imported rows re-imports as the same comparisons."""
    if isinstance(row, dict):
        row = {key: value for key, value in row.items() if key != "source"}
    # default=str: a Parquet file may carry extra columns (dates, bytes) that JSON has no type for.
    canonical = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _jsonl_rows(text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                value = json_object(line, number)  # raises with the line and reason
            yield number, value


def _parquet_rows(file: str | Path | BinaryIO) -> Iterator[tuple[int, Any]]:
    """Rows as plain values, read in record batches (constant memory)."""
    try:
        parquet = pq.ParquetFile(file)
    except pa.ArrowException as exc:
        raise RowError(0, f"not a readable Parquet file ({exc})") from None
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=CHUNK):
            for row in batch.to_pylist():
                number += 1
                yield number, row
    except pa.ArrowException as exc:
        raise RowError(number + 1, f"cannot be read ({exc})") from None


def import_comparisons(data: bytes, *, source: str, user: Any = None) -> int:
    """Import every comparison of a JSONL file; returns how many were new."""
    return _import(_jsonl_rows(decode(data)), QuestionFileError, source=source, user=user)


def import_comparisons_parquet(file: str | Path | BinaryIO, *, source: str, user: Any = None) -> int:
    """Import every comparison of a Parquet file of flattened rows; returns how many were new."""
    return _import(_parquet_rows(file), RowError, source=source, user=user)


def _import(rows: Rows, error: Error, *, source: str, user: Any) -> int:
    """One transaction for the whole file, written a chunk at a time: a bad row rolls everything back."""
    created = seen = 0
    iterator = iter(rows)
    with transaction.atomic():
        while chunk := list(islice(iterator, CHUNK)):
            seen += len(chunk)
            parsed = [(_row_key(value), *_records(value, number, error)) for number, value in chunk]
            # Earlier chunks are already written in this transaction, so the query also finds them.
            known = set(
                ImportedComparison.objects.filter(row_key__in=[p[0] for p in parsed]).values_list(
                    "row_key", flat=True
                )
            )
            for row_key, question_data, sides in parsed:
                if row_key in known:
                    continue
                _create(question_data, sides, source, row_key)
                known.add(row_key)
                created += 1
        if not seen:
            raise error(0, "the file holds no comparisons")
        log_action(user, "comparisons.import", None, source=source, created=created)
    return created


def _create(question_data: dict, sides: list[tuple[str, list, float]], source: str, row_key: str) -> None:
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
