"""Importing a question file: all of it in one transaction, or nothing."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import PurePath
from typing import BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction

from annotation.models import Question, QuestionImport
from annotation.questions.formats import (
    ParsedQuestion,
    QuestionFileError,
    detect_format_of_lines,
    parse_lines,
    read_lines,
)
from annotation.questions.splits import assign_split, question_key, with_explain_prefix
from core.models import log_action
from core.permissions import AnyUser

# Dataset names used when neither the rows nor the caller name one.
DEFAULT_DATASETS = {"truthfulqa": "truthfulqa", "triviaqa": "triviaqa"}
DUPLICATES_KEPT = 100
_BATCH = 1000


def import_questions(
    source: bytes | BinaryIO,
    *,
    filename: str,
    user: AnyUser | None = None,
    dataset: str | None = None,
    file_format: str | None = None,
    explain_statements: bool | None = None,
) -> QuestionImport:
    """Import every question of a file, skipping (and reporting) duplicates.

    ``dataset`` names the dataset for formats without one per row (plain JSONL rows keep their own);
    by default it is the format's name, or the file's stem for WebGLM and plain files.
    ``explain_statements`` prefixes statements with "Explain: " (default: only for dataset ``eli5``).
    ``source`` is the file's bytes or a binary file (an upload: its size is checked before it is read,
    then it is read a chunk at a time). Raises ``QuestionFileError`` (with the line) and changes nothing
    if any row is bad or the file is over ``QUESTION_IMPORT_MAX_BYTES``.
    """
    dataset_chars = Question._meta.get_field("dataset").max_length
    if dataset and len(dataset) > dataset_chars:
        raise QuestionFileError(0, f"the dataset name is longer than {dataset_chars} characters")
    filename = _printable(PurePath(filename).name)[: QuestionImport._meta.get_field("filename").max_length]
    digest = hashlib.sha256()
    lines = read_lines(source, max_bytes=settings.QUESTION_IMPORT_MAX_BYTES, digest=digest)
    if not file_format:
        head: list[tuple[int, str]] = []  # the lines read to detect the format, parsed again below
        file_format = detect_format_of_lines((head.append(line) or line for line in lines), filename)
        lines = itertools.chain(head, lines)
    records = parse_lines(lines, file_format)
    stem = PurePath(filename).stem[:dataset_chars]  # a name derived from an upload's file name: shortened
    default_dataset = dataset or DEFAULT_DATASETS.get(file_format) or stem or "questions"
    _check_lengths(records)

    try:
        with transaction.atomic():
            keys = {question_key(record.text) for record in records}
            existing = dict(Question.objects.filter(key__in=keys).values_list("key", "dataset"))
            new: list[Question] = []
            duplicates: list[dict[str, object]] = []
            first_line: dict[str, int] = {}
            for record in records:
                row_dataset = (record.dataset if file_format == "plain" else None) or default_dataset
                key = question_key(record.text)
                if key in first_line:
                    duplicates.append(
                        {"line": record.line, "reason": f"same question as line {first_line[key]}"}
                    )
                    continue
                first_line[key] = record.line
                if key in existing:
                    duplicates.append(
                        {"line": record.line, "reason": f"already in the bank ({existing[key]})"}
                    )
                    continue
                explain = explain_statements if explain_statements is not None else row_dataset == "eli5"
                new.append(
                    Question(
                        text=with_explain_prefix(record.text) if explain else record.text,
                        key=key,
                        dataset=row_dataset,
                        external_id=record.external_id,
                        split=assign_split(key, settings.QUESTION_SPLIT_RATIOS),
                        reference_answers=list(record.reference_answers),
                        metadata=record.metadata,
                    )
                )
            _refuse_reused_external_ids(new, first_line)
            report = QuestionImport.objects.create(
                created_by=user if getattr(user, "is_authenticated", False) else None,
                filename=filename,
                file_format=file_format,
                dataset=dataset or "",
                sha256=digest.hexdigest(),
                created_count=len(new),
                duplicate_count=len(duplicates),
                duplicates=duplicates[:DUPLICATES_KEPT],
            )
            for question in new:
                question.source_import = report
            Question.objects.bulk_create(new, batch_size=_BATCH)
            log_action(user, "questions.import", report, created=len(new), duplicates=len(duplicates))
    except IntegrityError:
        # Only a concurrent import of the same questions can get here: the checks above ran first.
        raise QuestionFileError(
            0, "another import added some of these questions at the same moment; import the file again"
        ) from None
    return report


def _printable(name: str) -> str:
    # Upload names may hold NUL (PostgreSQL cannot store it) and other control characters.
    return "".join(char for char in name if char.isprintable())


def _check_lengths(records: list[ParsedQuestion]) -> None:
    """Names longer than their columns: PostgreSQL refuses them (a 500), SQLite would store them whole."""
    for name, column in (("dataset", "dataset"), ("id", "external_id")):
        limit = Question._meta.get_field(column).max_length
        for record in records:
            if len(getattr(record, column) or "") > limit:
                raise QuestionFileError(record.line, f"'{name}' is longer than {limit} characters")


def _refuse_reused_external_ids(new: list[Question], line_of_key: dict[str, int]) -> None:
    """An id that already names a different question of the dataset makes the file ambiguous."""
    with_ids = [question for question in new if question.external_id]
    if not with_ids:
        return
    taken = set(
        Question.objects.filter(
            dataset__in={question.dataset for question in with_ids},
            external_id__in={question.external_id for question in with_ids},
        ).values_list("dataset", "external_id")
    )
    seen: set[tuple[str, str]] = set()
    for question in with_ids:
        pair = (question.dataset, question.external_id)
        if pair in taken or pair in seen:
            raise QuestionFileError(
                line_of_key[question.key],
                f"id {question.external_id!r} already names another question in dataset {question.dataset!r}",
            )
        seen.add(pair)
