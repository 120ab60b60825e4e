"""Question file formats: parse a whole file into records or fail naming the line. Pure Python.

Formats (``detect_format`` picks one from the file's name and first record; ``--format`` overrides):
- ``truthfulqa``: the TruthfulQA CSV (columns Question, Best Answer, Correct Answers, ...).
- ``triviaqa``: JSONL rows ``{"context": "Question: ...\\nAnswer:", "answer": str, "aliases": [str]}``.
- ``webglm``: JSONL rows ``{"question": str, "answer": [str]}`` (WebGLM's nq_open / web_questions).
- ``plain``: JSONL rows ``{"question": str, "id"?: str, "dataset"?: str, "reference_answers"?: [str],
  "metadata"?: {}}``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from core.inputs import JSONInputError, has_nul, loads

__all__ = ["FORMATS", "ParsedQuestion", "QuestionFileError", "decode", "detect_format", "has_nul", "parse"]

FORMATS = ("truthfulqa", "triviaqa", "webglm", "plain")
MAX_QUESTION_CHARS = 4000
_TRIVIA_CONTEXT = re.compile(r"^\s*Question:\s*(?P<q>.+?)\s*\n\s*Answer:\s*$", re.DOTALL)


class QuestionFileError(ValueError):
    """The file cannot be imported; ``line`` is 1-based (0 when the problem is the file as a whole)."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}" if line else reason)


@dataclass(frozen=True)
class ParsedQuestion:
    line: int
    text: str
    dataset: str | None = None
    external_id: str = ""
    reference_answers: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


Lines = Iterable[tuple[int, str]]  # (1-based line number, the line without its "\n" or "\r\n")
CHUNK_BYTES = 1 << 20


def decode(data: bytes) -> str:
    """The file's text; not UTF-8, or holding U+0000 (PostgreSQL cannot store it; CSV readers pass it
    through), is refused with the line."""
    return "\n".join(line for _, line in read_lines(data, max_bytes=len(data)))


def read_lines(source: bytes | BinaryIO, *, max_bytes: int, digest: Any = None) -> Iterator[tuple[int, str]]:
    """The lines of a file as it is read, a chunk at a time: an upload is never held whole in memory.

    The size is checked first where it is known (an upload's ``size``, bytes), and again while reading;
    over ``max_bytes`` is refused before anything is parsed. Each line must be UTF-8 without U+0000 (a
    leading byte-order mark is dropped); lines are split at "\n" only (JSON allows U+2028 in strings) and
    lose a trailing "\r". ``digest`` (a hashlib object) is fed every byte read.
    """
    stream = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    size = len(source) if isinstance(source, bytes | bytearray) else getattr(source, "size", None)
    if size is not None and size > max_bytes:
        raise QuestionFileError(0, f"the file is larger than {max_bytes} bytes ({size} bytes)")
    total, number, pending = 0, 0, [b""]  # pending: the pieces of a line not ended yet
    while chunk := stream.read(CHUNK_BYTES):
        total += len(chunk)
        if total > max_bytes:
            raise QuestionFileError(0, f"the file is larger than {max_bytes} bytes")
        if digest is not None:
            digest.update(chunk)
        pieces = chunk.split(b"\n")
        if len(pieces) == 1:  # a long line goes on: join its pieces once, at its end
            pending.append(chunk)
            continue
        for raw in (b"".join([*pending, pieces[0]]), *pieces[1:-1]):
            number += 1
            yield number, _line_text(raw, number)
        pending = [pieces[-1]]
    number += 1
    yield number, _line_text(b"".join(pending), number)  # the last line ("" after a final "\n")


def _line_text(raw: bytes, number: int) -> str:
    try:
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError:
        raise QuestionFileError(number, "not valid UTF-8 text") from None
    if "\x00" in text:
        raise QuestionFileError(number, "text may not contain NUL characters (U+0000)")
    return text.removesuffix("\r")


def detect_format(text: str, filename: str = "") -> str:
    return detect_format_of_lines(_numbered(text), filename)


def detect_format_of_lines(lines: Lines, filename: str = "") -> str:
    """The format of a file from its name (.csv) or its first non-empty line."""
    if filename.lower().endswith(".csv"):
        return "truthfulqa"
    for line_number, line in lines:
        if not line.strip():
            continue
        row = json_object(line, line_number)
        if "context" in row:
            return "triviaqa"
        if "answer" in row and "reference_answers" not in row:
            return "webglm"
        return "plain"
    raise QuestionFileError(0, "the file is empty")


def parse(text: str, fmt: str) -> list[ParsedQuestion]:
    """All records of the file, or ``QuestionFileError`` for the first bad one."""
    return parse_lines(_numbered(text), fmt)


def parse_lines(lines: Lines, fmt: str) -> list[ParsedQuestion]:
    """All records of a file's lines (``read_lines``), or ``QuestionFileError`` for the first bad one."""
    if fmt not in FORMATS:
        raise QuestionFileError(0, f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "truthfulqa":
        records = list(_parse_truthfulqa(lines))
    else:
        row_parser = {"triviaqa": _triviaqa_row, "webglm": _webglm_row, "plain": _plain_row}[fmt]
        records = list(_parse_jsonl(lines, row_parser))
    if not records:
        raise QuestionFileError(0, "the file holds no questions")
    return records


def _numbered(text: str) -> Lines:
    # JSON Lines are separated by "\n" only: str.splitlines() would also split inside strings that hold
    # U+2028 and friends, which JSON allows unescaped.
    return enumerate((line.removesuffix("\r") for line in text.split("\n")), start=1)


def json_object(line: str, line_number: int) -> dict[str, Any]:
    """One JSON Lines row as an object. Nesting, numbers and NUL are held to the API's limits
    (``core.inputs``): what PostgreSQL cannot store is refused here, with the line."""
    try:
        row = loads(line)
    except JSONInputError as exc:
        raise QuestionFileError(line_number, str(exc)) from None
    if not isinstance(row, dict):
        raise QuestionFileError(line_number, "expected a JSON object")
    if has_nul(row):
        raise QuestionFileError(line_number, "text may not contain NUL characters")
    return row


def _parse_jsonl(
    lines: Lines, row_parser: Callable[[dict[str, Any], int], ParsedQuestion]
) -> Iterator[ParsedQuestion]:
    for line_number, line in lines:
        if line.strip():
            yield row_parser(json_object(line, line_number), line_number)


def _question_text(value: Any, line: int, name: str = "question") -> str:
    if not isinstance(value, str) or not value.strip():
        raise QuestionFileError(line, f"'{name}' must be a non-empty string")
    text = " ".join(value.split())
    if len(text) > MAX_QUESTION_CHARS:
        raise QuestionFileError(line, f"'{name}' is longer than {MAX_QUESTION_CHARS} characters")
    return text


def _string_list(value: Any, line: int, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise QuestionFileError(line, f"'{name}' must be a list of strings")
    return _unique(value)


def _unique(items: list[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        if item.strip():
            seen.setdefault(item.strip(), None)
    return tuple(seen)


def _triviaqa_row(row: dict[str, Any], line: int) -> ParsedQuestion:
    for key in ("context", "answer"):
        if key not in row:
            raise QuestionFileError(line, f"missing '{key}' (TriviaQA rows have context, answer, aliases)")
    context = row["context"]
    match = _TRIVIA_CONTEXT.match(context) if isinstance(context, str) else None
    if not match:
        raise QuestionFileError(line, "'context' must read 'Question: <question>\\nAnswer:'")
    if not isinstance(row["answer"], str) or not row["answer"].strip():
        raise QuestionFileError(line, "'answer' must be a non-empty string")
    aliases = _string_list(row.get("aliases", []), line, "aliases")
    return ParsedQuestion(
        line=line,
        text=_question_text(match["q"], line),
        reference_answers=(row["answer"].strip(),),
        metadata={"aliases": list(aliases)},
    )


def _webglm_row(row: dict[str, Any], line: int) -> ParsedQuestion:
    if "question" not in row:
        raise QuestionFileError(line, "missing 'question'")
    answers = row.get("answer", [])
    if isinstance(answers, str):
        answers = [answers]
    return ParsedQuestion(
        line=line,
        text=_question_text(row["question"], line),
        reference_answers=_string_list(answers, line, "answer"),
    )


def _plain_row(row: dict[str, Any], line: int) -> ParsedQuestion:
    if "question" not in row:
        raise QuestionFileError(line, "missing 'question'")
    external_id = row.get("id", "")
    if not isinstance(external_id, str | int) or isinstance(external_id, bool):
        raise QuestionFileError(line, "'id' must be a string or an integer")
    dataset = row.get("dataset")
    if dataset is not None and (not isinstance(dataset, str) or not dataset.strip()):
        raise QuestionFileError(line, "'dataset' must be a non-empty string")
    metadata = row.get("metadata", {})
    if not isinstance(metadata, dict):
        raise QuestionFileError(line, "'metadata' must be an object")
    extra = {
        k: v
        for k, v in row.items()
        if k not in {"id", "question", "dataset", "reference_answers", "metadata"}
    }
    return ParsedQuestion(
        line=line,
        text=_question_text(row["question"], line),
        dataset=dataset.strip() if dataset else None,
        external_id=str(external_id).strip(),
        reference_answers=_string_list(row.get("reference_answers", []), line, "reference_answers"),
        metadata={**extra, **metadata},
    )


_TRUTHFULQA_REQUIRED = ("Question", "Best Answer", "Correct Answers")


def _parse_truthfulqa(lines: Lines) -> Iterator[ParsedQuestion]:
    reader = csv.DictReader(line + "\n" for _, line in lines)  # csv counts these as its line_num
    header = reader.fieldnames or []
    missing = [column for column in _TRUTHFULQA_REQUIRED if column not in header]
    if missing:
        raise QuestionFileError(1, f"missing column(s) {', '.join(missing)} (TruthfulQA CSV header)")
    row_index = 0
    start_line = reader.line_num + 1
    try:
        for row in reader:
            if None in row or any(value is None for value in row.values()):
                raise QuestionFileError(start_line, f"expected {len(header)} columns")
            yield ParsedQuestion(
                line=start_line,
                text=_question_text(row["Question"], start_line, "Question"),
                external_id=str(row_index),
                reference_answers=_unique([row["Best Answer"], *row["Correct Answers"].split(";")]),
                metadata=_truthfulqa_metadata(row),
            )
            row_index += 1
            start_line = reader.line_num + 1
    except csv.Error as exc:
        raise QuestionFileError(start_line, f"malformed CSV ({exc})") from None


def _truthfulqa_metadata(row: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        key: row[column]
        for key, column in (("type", "Type"), ("category", "Category"), ("source", "Source"))
        if row.get(column)
    }
    if row.get("Best Incorrect Answer"):
        metadata["best_incorrect_answer"] = row["Best Incorrect Answer"]
    if row.get("Incorrect Answers"):
        metadata["incorrect_answers"] = list(_unique(row["Incorrect Answers"].split(";")))
    return metadata
