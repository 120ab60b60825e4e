"""What a corpus import asked for from the console or the API may be: one check for both, before any row
is created, so a bad request changes nothing and a queued job is not bound to fail on its settings.

An upload is a .jsonl, a .zim, or a .zip of a folder of pages or of FreshWiki JSON files. A server path
must lie under ``CORPUS_IMPORT_ROOT`` (after resolving links and "..": nothing outside it is ever read);
without that setting only uploads are taken.

A .zip is checked from its table of contents before anything is unpacked: no more than
CORPUS_IMPORT_MAX_ZIP_ENTRIES entries (counted from its end record before zipfile reads the table into
memory, and again after), and for the members the readers read (pages, .json articles; the only ones
unpacked) no more than CORPUS_IMPORT_MAX_FILE_BYTES each, CORPUS_IMPORT_MAX_UNZIPPED_BYTES together, and
no better compression than CORPUS_IMPORT_MAX_ZIP_RATIO:1 (each member, and all of them against the
archive's real size). The worker enforces the same limits again on the bytes it really unpacks
(browser.import_jobs): the sizes in a table of contents are the archive's own claims.
"""

from __future__ import annotations

import importlib.util
import stat
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.core.validators import validate_slug

from browser.corpus.readers import FOLDER_TYPES, FORMATS, detect_format
from browser.corpus.records import CorpusFileError, is_http_url

UPLOAD_FORMATS = {".jsonl": ("jsonl",), ".zim": ("zim",), ".zip": ("folder", "freshwiki")}
UPLOAD_HELP = ".jsonl, .zim, or .zip (a folder of .html/.txt pages, or FreshWiki .json files)"
# Members of a .zip the readers read, so the only ones unpacked: pages and FreshWiki articles.
UNPACKED_TYPES = frozenset(FOLDER_TYPES) | {".json"}
# Below this many unpacked bytes the ratio is not checked: small files of repeated markup may compress far
# better than 100:1, and a megabyte is harmless whatever it was packed into.
RATIO_FREE_BYTES = 1024 * 1024


class ImportRequestError(ValueError):
    """A request no import can satisfy: ``field`` is the form or API field to show ``message`` under."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ImportRequest:
    corpus: str
    source_format: str
    base_url: str
    upload: UploadedFile | None  # exactly one of upload and path
    path: Path | None  # resolved, under CORPUS_IMPORT_ROOT
    source: str  # what the researcher gave: the upload's name, or the path relative to the root


def check_import_request(
    corpus: str, source_format: str, upload: UploadedFile | None, server_path: str, base_url: str
) -> ImportRequest:
    """The request, checked; ImportRequestError naming the field otherwise. ``source_format`` "" detects
    the format from the file's name, the .zip's contents or the folder."""
    try:
        validate_slug(corpus)
    except ValidationError:
        raise ImportRequestError("corpus", "A corpus name uses letters, digits, - and _ only.") from None
    if source_format and source_format not in FORMATS:
        raise ImportRequestError("source_format", f"Unknown format; expected one of {', '.join(FORMATS)}.")
    if base_url and not is_http_url(base_url):
        raise ImportRequestError("base_url", "The base URL must be an absolute http(s) URL.")
    if upload is not None and server_path:
        raise ImportRequestError("file", "Upload a file or give a server path, not both.")
    if upload is not None:
        source_format, source, path = _check_upload(upload, source_format), upload.name or "upload", None
    elif server_path:
        path = resolve_server_path(server_path)
        source_format = source_format or _detect(path)
        source = str(path.relative_to(settings.CORPUS_IMPORT_ROOT.resolve()))
    else:
        raise ImportRequestError("file", "Upload a corpus file or give a server path.")
    if source_format == "folder" and not base_url:
        raise ImportRequestError(
            "base_url", "A folder of pages needs a base URL (where its pages are served)."
        )
    if source_format == "zim" and importlib.util.find_spec("libzim") is None:
        raise ImportRequestError("source_format", "ZIM files need the libzim package on the server.")
    return ImportRequest(corpus, source_format, base_url, upload, path, source[:500])


def resolve_server_path(server_path: str) -> Path:
    """``server_path`` (relative to CORPUS_IMPORT_ROOT, or absolute inside it), resolved; refused when it
    leads anywhere else, by "..", an absolute path or a link."""
    root = settings.CORPUS_IMPORT_ROOT
    if root is None:
        raise ImportRequestError(
            "path", "Importing from a server path is off (CORPUS_IMPORT_ROOT is not set)."
        )
    if "\x00" in server_path:
        raise ImportRequestError("path", "A path may not contain NUL characters.")
    root = root.resolve()
    path = (root / server_path).resolve()
    if path != root and root not in path.parents:
        raise ImportRequestError("path", "The path must be inside the import folder (CORPUS_IMPORT_ROOT).")
    if not path.exists():
        raise ImportRequestError("path", "There is no such file or folder in the import folder.")
    return path


def _detect(path: Path) -> str:
    try:
        return detect_format(path)
    except CorpusFileError as exc:
        raise ImportRequestError("source_format", f"Cannot tell the format: {exc.reason}.") from None


def _check_upload(upload: UploadedFile, source_format: str) -> str:
    """The upload's format, checked against its name and (for a .zip) its table of contents."""
    if upload.size is not None and upload.size > settings.CORPUS_IMPORT_MAX_BYTES:
        limit = settings.CORPUS_IMPORT_MAX_BYTES
        raise ImportRequestError("file", f"The file is larger than {limit} bytes ({upload.size} bytes).")
    suffix = PurePosixPath(upload.name or "").suffix.lower()
    if suffix not in UPLOAD_FORMATS:
        raise ImportRequestError("file", f"Expected {UPLOAD_HELP}.")
    allowed = UPLOAD_FORMATS[suffix]
    if source_format and source_format not in allowed:
        raise ImportRequestError(
            "source_format", f"A {suffix} file holds {' or '.join(allowed)}, not {source_format}."
        )
    if suffix != ".zip":
        return allowed[0]
    try:
        upload.seek(0)
        return check_zip(upload.file, source_format)
    finally:
        upload.seek(0)


def check_zip(file: IO[bytes] | Path, source_format: str = "") -> str:
    """The format of a .zip's pages ("folder" or "freshwiki"), from its table of contents; refuses
    archives that would write outside their folder, hold links, encrypted or same-named files, or break
    the limits (module docstring). The worker checks the stored copy again before unpacking it."""
    if isinstance(file, Path):
        with file.open("rb") as opened:
            return check_zip(opened, source_format)
    members, archive_size = _table_of_contents(file)
    names = []
    for member in members:
        _check_member_name(member)
        if not member.is_dir():
            names.append(PurePosixPath(member.filename))
    if len(set(names)) < len(names):
        raise ImportRequestError("file", "The .zip holds two files of the same name.")
    unpacked = [member for member in members if unpacks(member)]
    for member in unpacked:
        check_unpacked_size(member.filename, member.file_size, member.compress_size)
    check_unpacked_total(sum(member.file_size for member in unpacked), archive_size)
    top = zip_folder(names)
    names = [n.relative_to(top) for n in names]
    visible = [n for n in names if not any(part.startswith(".") for part in n.parts)]
    has_pages = any(n.suffix.lower() in FOLDER_TYPES for n in visible)
    has_articles = any(n.suffix.lower() == ".json" and len(n.parts) == 1 for n in visible)
    detected = "folder" if has_pages else "freshwiki" if has_articles else ""
    if not detected:
        raise ImportRequestError("file", "The .zip holds no .html, .htm or .txt pages and no .json articles.")
    return source_format or detected


def _table_of_contents(file: IO[bytes]) -> tuple[list[zipfile.ZipInfo], int]:
    """The members of the .zip ``file`` and its size in bytes; refused when unreadable or holding more than
    CORPUS_IMPORT_MAX_ZIP_ENTRIES entries (asked of the end record before zipfile parses the whole table
    into memory, and counted again after: the end record's count is the archive's own claim)."""
    limit = settings.CORPUS_IMPORT_MAX_ZIP_ENTRIES
    too_many = f"The .zip holds more than {limit} entries."
    try:
        size = file.seek(0, 2)
        if (_declared_entries(file, size) or 0) > limit:
            raise ImportRequestError("file", too_many)
        file.seek(0)
        with zipfile.ZipFile(file) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        raise ImportRequestError("file", "Not a readable .zip file.") from None
    if len(members) > limit:
        raise ImportRequestError("file", too_many)
    return members, size


# The end of a .zip: its end record (signature, disk numbers, entries on this disk, entries in all, the
# table's size and offset, comment length); past 65,535 entries a ZIP64 end record and its locator precede it.
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64 = struct.Struct("<4sLQL")


def _declared_entries(file: IO[bytes], size: int) -> int | None:
    """How many entries the end record of the .zip ``file`` (``size`` bytes) says it holds, the record
    found where zipfile looks (at the very end, else the last one within a comment's reach); None when
    there is none (zipfile then refuses the file)."""
    file.seek(max(0, size - (_END.size + 65535 + _LOCATOR64.size + _END64.size)))
    tail = file.read()
    at = len(tail) - _END.size
    if at < 0 or tail[at : at + 4] != b"PK\x05\x06" or tail[-2:] != b"\0\0":
        at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _END.size > len(tail):
        return None
    entries = _END.unpack_from(tail, at)[4]
    locator, end64 = at - _LOCATOR64.size, at - _LOCATOR64.size - _END64.size
    if (
        end64 >= 0
        and tail[locator : locator + 4] == b"PK\x06\x07"
        and tail[end64 : end64 + 4] == b"PK\x06\x06"
    ):
        entries = _END64.unpack_from(tail, end64)[7]
    return entries


def _check_member_name(member: zipfile.ZipInfo) -> None:
    name = PurePosixPath(member.filename)
    if name.is_absolute() or ".." in name.parts or "\\" in member.filename:
        raise ImportRequestError("file", f"The .zip names a file outside its folder: {member.filename!r}.")
    if stat.S_ISLNK(member.external_attr >> 16):
        raise ImportRequestError("file", f"The .zip holds a link ({member.filename!r}); links are refused.")
    if member.flag_bits & 0x1:
        raise ImportRequestError("file", f"The .zip holds an encrypted file ({member.filename!r}).")


def unpacks(member: zipfile.ZipInfo) -> bool:
    """Whether the worker unpacks ``member``: only files the readers read (others are never written)."""
    return not member.is_dir() and PurePosixPath(member.filename).suffix.lower() in UNPACKED_TYPES


def _too_compressed(unpacked: int, packed: int) -> bool:
    return unpacked > RATIO_FREE_BYTES and unpacked > settings.CORPUS_IMPORT_MAX_ZIP_RATIO * packed


def check_unpacked_size(name: str, unpacked: int, packed: int) -> None:
    """Refuses the member ``name`` of a .zip that unpacks to ``unpacked`` bytes from ``packed``: as its
    table of contents says (check_zip), or as really unpacked so far (the worker)."""
    limit = settings.CORPUS_IMPORT_MAX_FILE_BYTES
    if unpacked > limit:
        raise ImportRequestError(
            "file", f"The .zip's {name!r} unpacks to more than {limit} bytes (per file)."
        )
    if _too_compressed(unpacked, packed):
        ratio = settings.CORPUS_IMPORT_MAX_ZIP_RATIO
        raise ImportRequestError("file", f"The .zip's {name!r} is compressed more than {ratio}:1.")


def check_unpacked_total(unpacked: int, archive_size: int) -> None:
    """Refuses a .zip of ``archive_size`` bytes whose members unpack to ``unpacked`` bytes together."""
    limit = settings.CORPUS_IMPORT_MAX_UNZIPPED_BYTES
    if unpacked > limit:
        raise ImportRequestError("file", f"The .zip unpacks to more than {limit} bytes.")
    if _too_compressed(unpacked, archive_size):
        ratio = settings.CORPUS_IMPORT_MAX_ZIP_RATIO
        raise ImportRequestError("file", f"The .zip is compressed more than {ratio}:1.")


def zip_folder(names: list[PurePosixPath]) -> PurePosixPath:
    """The one folder every file of a .zip is in (a zipped folder keeps its own name), else ".": the
    corpus is read from there."""
    tops = {name.parts[0] for name in names}
    if len(tops) == 1 and all(len(name.parts) > 1 for name in names):
        return PurePosixPath(tops.pop())
    return PurePosixPath(".")
