"""Corpus readers: iterators of CorpusRecords, read and checked one record at a time, so that a corpus far
larger than memory (a 6-million-article Wikipedia ZIM) streams into the index. An import stays all or
nothing because the index commits only after the last record (browser.services.import_corpus).

Every problem raises CorpusFileError naming the file and, where the format has lines, the line: most when
the iterator reaches them, some about the whole source (unknown format, bad base URL) at once. Duplicate
URLs inside one import are an error (not "last one wins"): they almost always mean a broken export.

A folder (of pages, or of FreshWiki articles) is read without following links: a page file that is a
symbolic link is refused with an error naming it, wherever it points, and a linked folder is not entered
(records.LinkFreeFolder). One rule, no exceptions for links that stay inside, so that nothing outside
the folder is ever read. A page file, a FreshWiki article or a ZIM entry over ``max_file_bytes`` is
refused before it is read into memory.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from browser.corpus.freshwiki import read_freshwiki
from browser.corpus.html_text import collapse_spaces, html_title
from browser.corpus.records import (
    CONTENT_TYPES,
    MAX_FILE_BYTES,
    CorpusFileError,
    CorpusRecord,
    LinkFreeFolder,
    is_http_url,
)

FORMATS = ("jsonl", "folder", "freshwiki", "zim")
FOLDER_TYPES = {".html": "text/html", ".htm": "text/html", ".txt": "text/plain"}
_JSONL_KEYS = {"url", "title", "text", "html"}
__all__ = [
    "FORMATS",
    "count_records",
    "read_corpus",
    "read_folder",
    "read_freshwiki",
    "read_jsonl",
    "read_zim",
]


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusFileError(str(path), data.count(b"\n", 0, e.start) + 1, "not valid UTF-8") from None


def _encodable(value: str) -> bool:
    """False for strings with lone surrogates (JSON allows "\\ud800"; the index cannot store them)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _jsonl_row(row: Any) -> CorpusRecord:
    """The record for one parsed JSONL row; ValueError(reason) when the row is invalid."""
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, not {type(row).__name__}")
    unknown = sorted(set(row) - _JSONL_KEYS)
    if unknown:
        raise ValueError(f"unknown key '{unknown[0]}' (expected url, title and one of text or html)")
    for key in ("url", "title"):
        if key not in row:
            raise ValueError(f"missing '{key}'")
    bodies = [k for k in ("text", "html") if k in row]
    if not bodies:
        raise ValueError("missing 'text' or 'html'")
    if len(bodies) == 2:
        raise ValueError("has both 'text' and 'html' (give one)")
    body = bodies[0]
    for key in ("url", "title", body):
        if not isinstance(row[key], str):
            raise ValueError(f"'{key}' must be a string, not {type(row[key]).__name__}")
        if not _encodable(row[key]):
            raise ValueError(f"'{key}' contains an invalid character (a lone surrogate)")
    if not is_http_url(row["url"]):
        raise ValueError(f"'url' must be an absolute http(s) URL: {row['url']!r}")
    title = collapse_spaces(row["title"])
    if not title:
        raise ValueError("'title' is empty")
    if not row[body].strip():
        raise ValueError(f"'{body}' is empty")
    return CorpusRecord(row["url"], title, row[body], "text/html" if body == "html" else "text/plain")


class _SeenUrls:
    """The line where each URL of a JSONL file first appeared, kept in a private temporary SQLite file
    rather than a dict: SQLite's page cache is bounded (about 2 MB), so checking a file of millions of
    rows for duplicates takes disk, not memory."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("")  # "": a private on-disk database, deleted when closed
        self._db.execute("PRAGMA journal_mode = OFF")  # scratch data: nothing to recover after a crash
        self._db.execute("CREATE TABLE seen (url TEXT PRIMARY KEY, line INTEGER NOT NULL) WITHOUT ROWID")

    def first_line(self, url: str, lineno: int) -> int | None:
        """The earlier line of ``url``, or None after recording that it first appears on ``lineno``."""
        added = self._db.execute("INSERT OR IGNORE INTO seen VALUES (?, ?)", (url, lineno)).rowcount
        if added:
            return None
        return self._db.execute("SELECT line FROM seen WHERE url = ?", (url,)).fetchone()[0]

    def close(self) -> None:
        self._db.close()


class _LongLine(Exception):
    """A line longer than the most one record may hold."""


def read_jsonl(path: str | Path, max_line_bytes: int = MAX_FILE_BYTES) -> Iterator[CorpusRecord]:
    """Rows ``{"url", "title", "text" | "html"}``, one JSON object per line; blank lines are skipped. A line
    over ``max_line_bytes`` (one page, like a folder's page file) is refused before it is read whole.

    Lines are split on "\\n" only (a binary file's lines): str.splitlines() would also split on U+2028
    and friends, which JSON allows unescaped inside strings."""
    path = Path(path)
    try:
        file = path.open("rb")
    except OSError as e:
        raise CorpusFileError(str(path), 0, f"cannot read ({e.strerror or e})") from None
    seen = _SeenUrls()
    count = 0
    lineno = 0
    try:
        # At most one record's bytes (+ a BOM, + 1 to tell) at a time: iterating the file would read a whole
        # line whatever its length, and one line of gigabytes would be held in memory.
        for raw in iter(lambda: file.readline(max_line_bytes + 4), b""):
            lineno += 1
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            raw = raw.removesuffix(b"\n")  # so that JSON errors name the column of this line
            if len(raw) > max_line_bytes:
                raise _LongLine
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CorpusFileError(str(path), lineno, "not valid UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                reason = f"invalid JSON ({e.msg} at column {e.colno})"
                raise CorpusFileError(str(path), lineno, reason) from None
            try:
                record = _jsonl_row(row)
            except ValueError as e:
                raise CorpusFileError(str(path), lineno, str(e)) from None
            first = seen.first_line(record.url, lineno)
            if first is not None:
                raise CorpusFileError(str(path), lineno, f"url {record.url} already appears on line {first}")
            count += 1
            yield record
    except _LongLine:
        reason = f"the line is longer than {max_line_bytes} bytes, the most one record may hold"
        raise CorpusFileError(str(path), lineno, reason) from None
    except OSError as e:
        raise CorpusFileError(str(path), 0, f"cannot read ({e.strerror or e})") from None
    finally:
        seen.close()
        file.close()
    if not count:
        raise CorpusFileError(str(path), 0, "no records in this file")


def _folder_files(root: Path) -> list[Path]:
    """Page files below ``root``, sorted by relative path; hidden files and folders are skipped, and so are
    linked folders (rglob does not enter them). Links named like pages are listed, to be refused when read."""
    found = [
        p
        for p in root.rglob("*")
        if p.suffix.lower() in FOLDER_TYPES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and (p.is_symlink() or p.is_file())
    ]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _check_base_url(path: Path, base_url: str) -> str:
    """``base_url`` ending in "/"; CorpusFileError unless it is an absolute http(s) URL."""
    if not is_http_url(base_url):
        raise CorpusFileError(str(path), 0, f"base URL must be an absolute http(s) URL: {base_url!r}")
    return base_url if base_url.endswith("/") else base_url + "/"


def read_folder(
    path: str | Path, base_url: str, max_file_bytes: int = MAX_FILE_BYTES
) -> Iterator[CorpusRecord]:
    """Every .html/.htm/.txt file below ``path``, served at ``base_url`` + its relative path.

    The title is the HTML <title>, else the file name without extension (underscores as spaces). Only
    the list of file paths is held, one file's content at a time. A page that is a link, or larger than
    ``max_file_bytes``, is refused when the iterator reaches it."""
    root = Path(path)
    base = _check_base_url(root, base_url)
    files = _folder_files(root)
    if not files:
        raise CorpusFileError(str(root), 0, "no .html, .htm or .txt files in this folder")
    return _folder_records(root, base, files, max_file_bytes)


def _folder_records(root: Path, base: str, files: list[Path], max_bytes: int) -> Iterator[CorpusRecord]:
    with LinkFreeFolder(root) as folder:  # no link below is followed, even one swapped in later
        for file in files:
            yield _folder_record(root, base, file, folder.read(file, max_bytes))


def _folder_record(root: Path, base: str, file: Path, data: bytes) -> CorpusRecord:
    content = _decode(file, data)
    if not content.strip():
        raise CorpusFileError(str(file), 0, "file is empty")
    content_type = FOLDER_TYPES[file.suffix.lower()]
    title = html_title(content) if content_type == "text/html" else ""
    title = title or collapse_spaces(file.stem.replace("_", " ")) or file.name
    url = base + quote(file.relative_to(root).as_posix())
    return CorpusRecord(url, title, content, content_type)


def _zim_host(name: str) -> str:
    host = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    return host or "zim"


def read_zim(
    path: str | Path, base_url: str | None = None, max_file_bytes: int = MAX_FILE_BYTES
) -> Iterator[CorpusRecord]:
    """HTML and plain-text entries (not redirects) of a ZIM archive, served at ``base_url`` + entry path.

    The default base URL is ``https://<the ZIM's Name metadata or file name>/``. libzim is GPL-3.0 and
    optional, so it is imported only here. Empty entries are skipped. Entries are read one at a time (a
    ZIM's paths are unique, so no duplicate check is needed); one over ``max_file_bytes`` is refused
    before it is read."""
    path = Path(path)
    try:
        from libzim.reader import Archive  # optional (GPL-3.0): imported only when used
    except ImportError:
        reason = "ZIM support needs the libzim package: pip install libzim"
        raise CorpusFileError(str(path), 0, reason) from None
    if not path.is_file():
        raise CorpusFileError(str(path), 0, "no such file")
    try:
        archive = Archive(path)
    except RuntimeError as e:
        raise CorpusFileError(str(path), 0, f"not a readable ZIM file ({e})") from None
    if base_url is None:
        name = path.stem
        if "Name" in archive.metadata_keys:
            name = bytes(archive.get_metadata("Name")).decode("utf-8", "replace") or name
        base_url = f"https://{_zim_host(name)}/"
    return _zim_records(path, archive, _check_base_url(path, base_url), max_file_bytes)


def _zim_records(path: Path, archive: Any, base: str, max_bytes: int) -> Iterator[CorpusRecord]:
    old_scheme = not archive.has_new_namespace_scheme  # articles are then the "A/" namespace
    count = 0
    for entry_id in range(archive.entry_count):
        entry = archive._get_entry_by_id(entry_id)
        if entry.is_redirect or (old_scheme and not entry.path.startswith("A/")):
            continue
        item = entry.get_item()
        content_type = item.mimetype.split(";")[0].strip().lower()
        if content_type not in CONTENT_TYPES:
            continue
        if item.size > max_bytes:
            reason = f"entry {entry.path!r} is larger than {max_bytes} bytes, the most one entry may hold"
            raise CorpusFileError(str(path), 0, reason)
        try:
            content = bytes(item.content).decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusFileError(str(path), 0, f"entry {entry.path!r} is not valid UTF-8") from None
        if not content.strip():
            continue
        title = collapse_spaces(entry.title)
        if not title and content_type == "text/html":
            title = html_title(content)
        url = base + quote(entry.path, safe="/!$&'()*+,;=:@-._~")
        count += 1
        yield CorpusRecord(url, title or entry.path, content, content_type)
    if not count:
        raise CorpusFileError(str(path), 0, "no text/html or text/plain entries in this ZIM file")


def detect_format(path: str | Path) -> str:
    """ "jsonl" or "zim" by file extension; for a folder, "freshwiki" when it holds .json files and no
    pages, else "folder"."""
    path = Path(path)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".zim"):
            return suffix[1:]
        raise CorpusFileError(str(path), 0, "cannot tell the format from the name (expected .jsonl or .zim)")
    if path.is_dir():
        if any(path.glob("*.json")) and not _folder_files(path):
            return "freshwiki"
        return "folder"
    raise CorpusFileError(str(path), 0, "no such file or folder")


def read_corpus(
    path: str | Path,
    fmt: str | None = None,
    base_url: str | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> Iterator[CorpusRecord]:
    """The records of a corpus in format ``fmt`` (one of FORMATS; detected when None). ``base_url`` is
    where a folder's files are served (required for "folder") or overrides a ZIM's default; other formats
    carry their own URLs. An unknown format, a missing or bad base URL, an empty folder and an unreadable
    ZIM raise here; a bad record (or an unreadable JSONL file) raises when the iterator reaches it.
    FreshWiki is read whole before the first record: its articles link to each other, so all are loaded
    before any is rendered (a FreshWiki corpus is small). ``max_file_bytes`` bounds one page file, article,
    ZIM entry or JSONL line (each read whole into memory); a JSONL file is streamed line by line."""
    fmt = fmt or detect_format(path)
    if fmt == "jsonl":
        return read_jsonl(path, max_file_bytes)
    if fmt == "freshwiki":
        return iter(read_freshwiki(path, max_file_bytes))
    if fmt == "zim":
        return read_zim(path, base_url, max_file_bytes)
    if fmt == "folder":
        if not base_url:
            reason = "a folder corpus needs a base URL (where its pages are served)"
            raise CorpusFileError(str(path), 0, reason)
        return read_folder(path, base_url, max_file_bytes)
    raise CorpusFileError(str(path), 0, f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")


def count_records(path: str | Path, fmt: str) -> int | None:
    """How many records ``path`` holds, where that is cheap to know before reading them (for a progress
    bar): a JSONL file's non-blank lines (one streamed pass, no parsing) or a folder's page files; None
    for the other formats. An unreadable source gives None: reading it reports the problem."""
    try:
        if fmt == "jsonl":
            with Path(path).open("rb") as file:
                return _count_lines(file)
        if fmt == "folder":
            return len(_folder_files(Path(path)))
    except OSError:
        return None
    return None


def _count_lines(file: BinaryIO, piece: int = 1 << 20) -> int:
    """Non-blank lines, read a piece at a time (a line of gigabytes is counted, not held)."""
    count, blank = 0, True
    while raw := file.readline(piece):
        blank = blank and not raw.strip()
        if raw.endswith(b"\n"):
            count, blank = count + (not blank), True
    return count + (not blank)
