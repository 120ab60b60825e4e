"""Corpus readers: each reads and validates a whole source before returning, so an import is all or nothing.

Every problem raises CorpusFileError naming the file and, where the format has lines, the line. Duplicate
URLs inside one import are an error (not "last one wins"): they almost always mean a broken export.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from browser.corpus.freshwiki import read_freshwiki
from browser.corpus.html_text import collapse_spaces, html_title
from browser.corpus.records import CONTENT_TYPES, CorpusFileError, CorpusRecord, is_http_url

OnRecord = Callable[[int], None]  # called with the number of records read so far
FORMATS = ("jsonl", "folder", "freshwiki", "zim")
FOLDER_TYPES = {".html": "text/html", ".htm": "text/html", ".txt": "text/plain"}
_JSONL_KEYS = {"url", "title", "text", "html"}
__all__ = ["FORMATS", "read_corpus", "read_folder", "read_freshwiki", "read_jsonl", "read_zim"]


def _ignore(count: int) -> None:
    pass


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise CorpusFileError(str(path), 0, f"cannot read ({e.strerror or e})") from None


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


def read_jsonl(path: str | Path, on_record: OnRecord = _ignore) -> list[CorpusRecord]:
    """Rows ``{"url", "title", "text" | "html"}``, one JSON object per line; blank lines are skipped.

    Lines are split on "\\n" only: str.splitlines() would also split on U+2028 and friends, which JSON
    allows unescaped inside strings."""
    path = Path(path)
    data = _read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    records: list[CorpusRecord] = []
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusFileError(str(path), lineno, "not valid UTF-8") from None
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusFileError(str(path), lineno, f"invalid JSON ({e.msg} at column {e.colno})") from None
        try:
            record = _jsonl_row(row)
        except ValueError as e:
            raise CorpusFileError(str(path), lineno, str(e)) from None
        if record.url in first_line:
            reason = f"url {record.url} already appears on line {first_line[record.url]}"
            raise CorpusFileError(str(path), lineno, reason)
        first_line[record.url] = lineno
        records.append(record)
        on_record(len(records))
    if not records:
        raise CorpusFileError(str(path), 0, "no records in this file")
    return records


def _folder_files(root: Path) -> list[Path]:
    """Page files below ``root``, sorted by relative path; hidden files and folders are skipped."""
    found = [
        p
        for p in root.rglob("*")
        if p.suffix.lower() in FOLDER_TYPES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and p.is_file()
    ]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def read_folder(path: str | Path, base_url: str, on_record: OnRecord = _ignore) -> list[CorpusRecord]:
    """Every .html/.htm/.txt file below ``path``, served at ``base_url`` + its relative path.

    The title is the HTML <title>, else the file name without extension (underscores as spaces)."""
    root = Path(path)
    if not is_http_url(base_url):
        raise CorpusFileError(str(root), 0, f"base URL must be an absolute http(s) URL: {base_url!r}")
    base = base_url if base_url.endswith("/") else base_url + "/"
    files = _folder_files(root)
    if not files:
        raise CorpusFileError(str(root), 0, "no .html, .htm or .txt files in this folder")
    records = []
    for file in files:
        content = _decode(file, _read_bytes(file))
        if not content.strip():
            raise CorpusFileError(str(file), 0, "file is empty")
        content_type = FOLDER_TYPES[file.suffix.lower()]
        title = html_title(content) if content_type == "text/html" else ""
        title = title or collapse_spaces(file.stem.replace("_", " ")) or file.name
        url = base + quote(file.relative_to(root).as_posix())
        records.append(CorpusRecord(url, title, content, content_type))
        on_record(len(records))
    return records


def _zim_host(name: str) -> str:
    host = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    return host or "zim"


def read_zim(
    path: str | Path, base_url: str | None = None, on_record: OnRecord = _ignore
) -> list[CorpusRecord]:
    """HTML and plain-text entries (not redirects) of a ZIM archive, served at ``base_url`` + entry path.

    The default base URL is ``https://<the ZIM's Name metadata or file name>/``. libzim is GPL-3.0 and
    optional, so it is imported only here. Empty entries are skipped."""
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
    if not is_http_url(base_url):
        raise CorpusFileError(str(path), 0, f"base URL must be an absolute http(s) URL: {base_url!r}")
    base = base_url if base_url.endswith("/") else base_url + "/"
    old_scheme = not archive.has_new_namespace_scheme  # articles are then the "A/" namespace
    records = []
    for entry_id in range(archive.entry_count):
        entry = archive._get_entry_by_id(entry_id)
        if entry.is_redirect or (old_scheme and not entry.path.startswith("A/")):
            continue
        item = entry.get_item()
        content_type = item.mimetype.split(";")[0].strip().lower()
        if content_type not in CONTENT_TYPES:
            continue
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
        records.append(CorpusRecord(url, title or entry.path, content, content_type))
        on_record(len(records))
    if not records:
        raise CorpusFileError(str(path), 0, "no text/html or text/plain entries in this ZIM file")
    return records


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
    path: str | Path, fmt: str | None = None, base_url: str | None = None, on_record: OnRecord = _ignore
) -> list[CorpusRecord]:
    """Read a corpus in format ``fmt`` (one of FORMATS; detected when None). ``base_url`` is where a
    folder's files are served (required for "folder") or overrides a ZIM's default; other formats carry
    their own URLs. ``on_record`` hears the count after each record read (FreshWiki: once, at the end:
    its articles link to each other, so all are loaded before any is rendered)."""
    fmt = fmt or detect_format(path)
    if fmt == "jsonl":
        return read_jsonl(path, on_record)
    if fmt == "freshwiki":
        records = read_freshwiki(path)
        on_record(len(records))
        return records
    if fmt == "zim":
        return read_zim(path, base_url, on_record)
    if fmt == "folder":
        if not base_url:
            reason = "a folder corpus needs a base URL (where its pages are served)"
            raise CorpusFileError(str(path), 0, reason)
        return read_folder(path, base_url, on_record)
    raise CorpusFileError(str(path), 0, f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
