"""Corpus imports as jobs: checked and queued by the console or the API, run by a worker on the ``exports``
queue (the queue of long file jobs, so small jobs on ``default`` never wait behind a large corpus), with
the same importer as ``manage.py import_corpus`` (browser.services.import_corpus).

An upload is published to the ``imports`` storage (``core/storage.py``: the folder
``MEDIA_ROOT/corpus-imports/``, or the bucket, where a worker on another machine finds it) and removed when
the job ends; the worker reads it there or from a temporary copy, and unpacks a .zip beside it: only its
pages and articles, a chunk at a time, counting the bytes really written against the limits check_zip
applied to the table of contents (browser.import_requests), so a .zip whose sizes lie is stopped as soon
as it passes one, before it fills the disk or the memory of the reader.
"""

from __future__ import annotations

import lzma
import shutil
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from django.db import transaction

from browser.corpus.records import CorpusFileError
from browser.import_requests import (
    ImportRequest,
    ImportRequestError,
    check_unpacked_size,
    check_unpacked_total,
    check_zip,
    resolve_server_path,
    unpacks,
    zip_folder,
)
from browser.models import Corpus, CorpusImport
from browser.services import import_corpus
from core.jobs.models import JobError
from core.jobs.queueing import enqueue
from core.jobs.runner import run_job
from core.models import log_action
from core.progress import Every
from core.storage import IMPORTS, get_storage

UNPACK_CHUNK = 1024 * 1024  # bytes unpacked between two checks of the limits


def staging_dir() -> Path:
    """Where this machine writes an upload before publishing it and unpacks a .zip (the imports folder
    itself with local storage)."""
    return get_storage(IMPORTS).scratch_dir()


def request_corpus_import(user: Any, request: ImportRequest) -> CorpusImport:
    """Create the job row (and the corpus, if new), keep the upload where the worker finds it, and queue
    the job on the ``exports`` queue once committed. ``request`` comes from check_import_request."""
    with transaction.atomic():
        corpus, _ = Corpus.objects.get_or_create(name=request.corpus)
        job = CorpusImport.objects.create(
            corpus=corpus,
            source=request.source,
            source_format=request.source_format,
            base_url=request.base_url,
            owner=user if getattr(user, "is_authenticated", False) else None,
        )
        if request.upload is not None:
            job.upload = f"import-{job.pk}{PurePosixPath(request.source).suffix.lower()}"
            _store(request.upload, job.upload)
            job.save(update_fields=["upload"])
        log_action(user, "corpus.import_request", job, corpus=corpus.name, source=job.source)
        enqueue(job)
    return job


def _store(upload: Any, name: str) -> None:
    """The upload's bytes published as ``name``, written a chunk at a time; nothing is left if writing or
    publishing fails (the row is then rolled back too)."""
    handle, temp_name = tempfile.mkstemp(dir=staging_dir(), prefix=f".{name}-", suffix=".part")
    try:
        with open(handle, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        get_storage(IMPORTS).publish_file(name, Path(temp_name))
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


class _Recorder:
    """``on_progress`` for the importer: writes the row at most every second, and at once when the total
    changes (the import's first report, which gives the bar its total where one is known)."""

    def __init__(self, pk: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.pk, self.saves, self.total = pk, Every(clock=clock), None

    def __call__(self, done: int, total: int | None) -> None:
        if not self.saves.due(force=total != self.total):
            return
        self.total = total
        CorpusImport.objects.filter(pk=self.pk).update(progress=done, total=total)


def run_corpus_import_job(import_id: int) -> CorpusImport:
    """The worker's job (core.jobs.runner: whatever happens, the row ends done or failed with the
    reason, bad data named by file and line); the corpus's index is changed only by a complete import, and
    the upload is removed when the job ends."""
    return run_job(CorpusImport, import_id, _execute, related=("corpus", "owner"))


def _execute(job: CorpusImport) -> CorpusImport:
    source: tuple[Path, str] | None = None
    try:
        with _source(job) as source:
            report = import_corpus(
                job.corpus.name,
                source[0],
                source_format=job.source_format,
                base_url=job.base_url or None,
                user=job.owner,
                job=job,
                on_progress=_Recorder(job.pk),
            )
    except (CorpusFileError, ImportRequestError) as exc:  # bad data: the reason is on the row
        raise JobError(_describe(exc, source)) from exc
    CorpusImport.discard_partial(job.pk)  # the upload is read (a failure's is discarded by run_job)
    return report


@contextmanager
def _source(job: CorpusImport) -> Iterator[tuple[Path, str]]:
    """The path the importer reads and the name to show for it in errors: an upload's stored copy (a .zip
    unpacked into a temporary folder), or the server path, checked again."""
    if not job.upload:
        yield resolve_server_path(job.source), job.source  # the root or a link may have changed since
        return
    with get_storage(IMPORTS).local_copy(job.upload) as stored:
        if stored.suffix != ".zip":
            yield stored, job.source
            return
        check_zip(stored, job.source_format)
        unpacked = Path(tempfile.mkdtemp(dir=staging_dir(), prefix=f".import-{job.pk}-"))
        try:
            yield unpack_zip(stored, unpacked), job.source
        finally:
            shutil.rmtree(unpacked, ignore_errors=True)


def unpack_zip(stored: Path, into: Path) -> Path:
    """The pages and articles of the .zip ``stored`` (checked by check_zip) written below the empty folder
    ``into``, streamed and counted; the folder to read (the zipped folder, if the .zip holds one)."""
    archive_size = stored.stat().st_size
    with zipfile.ZipFile(stored) as archive:
        members = archive.infolist()
        total = 0
        for member in filter(unpacks, members):
            total += _unpack_member(archive, member, into, total, archive_size)
    return into / zip_folder([PurePosixPath(m.filename) for m in members if not m.is_dir()])


def _unpack_member(
    archive: zipfile.ZipFile, member: zipfile.ZipInfo, into: Path, before: int, size: int
) -> int:
    """Write ``member`` below ``into`` (its name was checked: it stays inside); the bytes written. Limits
    are checked on the real count after every chunk, ``before`` bytes having been written already."""
    target = into / member.filename
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        out = target.open("xb")  # "x": a new file, never through an existing name (or link)
    except (FileExistsError, NotADirectoryError, IsADirectoryError):
        raise ImportRequestError(
            "file", f"The .zip's {member.filename!r} clashes with another file's name."
        ) from None
    written = 0
    with out:
        for chunk in _member_chunks(archive, member):
            written += len(chunk)
            check_unpacked_size(member.filename, written, member.compress_size)
            check_unpacked_total(before + written, size)
            out.write(chunk)
    return written


def _member_chunks(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> Iterator[bytes]:
    """``member``'s unpacked bytes, a chunk at a time; a damaged member is refused naming it."""
    try:
        with archive.open(member) as source:
            while chunk := source.read(UNPACK_CHUNK):
                yield chunk
    except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError, NotImplementedError) as exc:
        raise ImportRequestError(
            "file", f"Cannot unpack {member.filename!r} from the .zip ({exc})."
        ) from None


def _describe(exc: CorpusFileError | ImportRequestError, source: tuple[Path, str] | None) -> str:
    """The reason, naming the researcher's file (and the member of a .zip), not the worker's copy."""
    if isinstance(exc, ImportRequestError):
        return exc.message
    where = exc.path
    if source is not None:
        path, shown = source
        try:
            inside = Path(exc.path).relative_to(path)
        except ValueError:
            inside = None
        if inside is not None:
            where = shown if inside == Path(".") else f"{shown}: {inside.as_posix()}"
    where = f"{where}: line {exc.line}" if exc.line else where
    return f"{where}: {exc.reason}. The corpus is unchanged."
