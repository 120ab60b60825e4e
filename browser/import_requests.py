"""What a corpus import asked for from the console or the API may be: one check for both, before any row
is created, so a bad request changes nothing and a queued job is not bound to fail on its settings.

An upload is a .jsonl, a .zim, or a .zip of a folder of pages or of FreshWiki JSON files. A server path
must lie under ``CORPUS_IMPORT_ROOT`` (after resolving links and "..": nothing outside it is ever read);
without that setting only uploads are taken.
"""

from __future__ import annotations

import importlib.util
import stat
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
    archives that would write outside their folder, hold links, or unpack to more than the limit. The
    worker checks the stored copy again before unpacking it."""
    try:
        with zipfile.ZipFile(file) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        raise ImportRequestError("file", "Not a readable .zip file.") from None
    names = []
    for member in members:
        name = PurePosixPath(member.filename)
        if name.is_absolute() or ".." in name.parts or "\\" in member.filename:
            raise ImportRequestError(
                "file", f"The .zip names a file outside its folder: {member.filename!r}."
            )
        if stat.S_ISLNK(member.external_attr >> 16):
            raise ImportRequestError(
                "file", f"The .zip holds a link ({member.filename!r}); links are refused."
            )
        if not member.is_dir():
            names.append(name)
    limit = settings.CORPUS_IMPORT_MAX_UNZIPPED_BYTES
    if sum(member.file_size for member in members) > limit:
        raise ImportRequestError("file", f"The .zip unpacks to more than {limit} bytes.")
    top = zip_folder(names)
    names = [n.relative_to(top) for n in names]
    visible = [n for n in names if not any(part.startswith(".") for part in n.parts)]
    has_pages = any(n.suffix.lower() in FOLDER_TYPES for n in visible)
    has_articles = any(n.suffix.lower() == ".json" and len(n.parts) == 1 for n in visible)
    detected = "folder" if has_pages else "freshwiki" if has_articles else ""
    if not detected:
        raise ImportRequestError("file", "The .zip holds no .html, .htm or .txt pages and no .json articles.")
    return source_format or detected


def zip_folder(names: list[PurePosixPath]) -> PurePosixPath:
    """The one folder every file of a .zip is in (a zipped folder keeps its own name), else ".": the
    corpus is read from there."""
    tops = {name.parts[0] for name in names}
    if len(tops) == 1 and all(len(name.parts) > 1 for name in names):
        return PurePosixPath(tops.pop())
    return PurePosixPath(".")
