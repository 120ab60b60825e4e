"""Writing an export: rows streamed from one repeatable-read snapshot into a temporary file on the worker,
which is published to the ``exports`` storage (a rename into the folder, or an upload to the bucket:
``core/storage.py``) only when complete; the row is done only after that (a crash leaves the row
failed, never a half file marked done)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from django.db import connection, connections, transaction
from django.http import Http404, HttpResponse

from annotation.exports.files import export_dir, part_prefix, published_name
from annotation.exports.parquet import SCHEMAS, write_parquet
from annotation.exports.rows import ROWS
from annotation.exports.rules import check_file_type
from annotation.models import Export
from annotation.models import ExportStatus as Status
from core.jobs.queueing import enqueue
from core.jobs.runner import run_job
from core.models import log_action
from core.progress import Every
from core.storage import EXPORTS, get_storage
from core.storage_cache import file_sha256


def export_path(export: Export) -> Path:
    """The finished file on this machine: in the exports folder (local storage), or a copy downloaded once
    into this machine's cache and checked against the recorded sha256 (object storage)."""
    return get_storage(EXPORTS).cached_file(export.file_name, export.sha256)


def download_response(export: Export) -> HttpResponse:
    """The finished export's download (the file, or a redirect to a short-lived presigned URL for it);
    Http404 saying why there is none (the page and the API give the same answer)."""
    if export.status != Status.DONE:
        raise Http404("This export is not finished.")
    try:
        return get_storage(EXPORTS).download_response(export.file_name, export.file_name)
    except FileNotFoundError:  # deleted from the folder or the bucket since the job wrote it
        raise Http404(
            "This export's file is no longer on the server (it was deleted); request the export again."
        ) from None


def write_rows(
    export_format: str,
    filters: dict[str, Any],
    out: Any,
    on_progress: Callable[[int], None] = lambda n: None,
    file_type: str = "jsonl",
) -> int:
    """Write the rows to the binary file ``out`` (JSONL, or Parquet for the formats that have a schema);
    all reads happen in one repeatable-read snapshot. The job calls this; so may a benchmark."""
    check_file_type(export_format, file_type)
    with _snapshot():
        rows = _reported(ROWS[export_format](filters), on_progress)
        if file_type == "parquet":
            return write_parquet(rows, SCHEMAS[export_format], out)
        count = 0
        for row in rows:
            out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))  # UTF-8, ~6x json.dumps
            count += 1
    return count


def _reported(rows: Iterable[dict[str, Any]], on_progress: Callable[[int], None]) -> Iterator[dict[str, Any]]:
    """``rows``, telling ``on_progress`` how many were taken so far at most every second: by time, not by
    a count of rows (every 5000 sat still for long stretches where rows are slow to make)."""
    reports = Every(due_now=False)
    for count, row in enumerate(rows, 1):
        yield row
        if reports.due():
            on_progress(count)


def _reads_in_own_snapshot() -> bool:
    """Whether ``write_rows`` opens its own read-only snapshot (outside any transaction; inside a caller's
    transaction, that one's snapshot holds)."""
    return not connection.in_atomic_block and connection.vendor in ("postgresql", "sqlite")


@contextmanager
def _snapshot() -> Iterator[None]:
    """One consistent view for all of an export's reads: labeling that goes on meanwhile cannot tear the
    file, and is not held up by it either."""
    if not _reads_in_own_snapshot():
        with transaction.atomic():
            yield
    elif connection.vendor == "postgresql":
        with transaction.atomic():
            connection.cursor().execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield
    else:
        # SQLite: Django's transactions are IMMEDIATE here (settings: they take the write lock when they
        # begin), which would make every labeler's write wait for the whole export. A DEFERRED transaction
        # that only reads holds a WAL snapshot and no lock a writer waits on.
        with connection.cursor() as cursor:
            cursor.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("COMMIT")  # it only read: nothing to keep or lose


@contextmanager
def _progress_recorder(export_id: int) -> Iterator[Callable[[int], None]]:
    """Records the rows written so far where the pages polling the job see them. In a read-only snapshot
    an update fails (and would show only at the end anyway; on SQLite it would need the write lock), so it
    goes through a second connection in autocommit; never inside a caller's transaction, whose row lock
    that connection would wait on."""
    if not _reads_in_own_snapshot():
        yield lambda count: Export.objects.filter(pk=export_id).update(progress=count)
        return
    own = connections.create_connection(connection.alias)
    table = own.ops.quote_name(Export._meta.db_table)  # our model's table; the values are parameters
    sql = f"UPDATE {table} SET progress = %s WHERE id = %s"  # noqa: S608

    def record(count: int) -> None:
        with own.cursor() as cursor:
            cursor.execute(sql, [count, export_id])

    try:
        yield record
    finally:
        own.close()


def _create_export(user: Any, export_format: str, filters: dict[str, Any], file_type: str) -> Export:
    """The job row, audited. ``filters`` come from ``rules.export_filters``; the file type is checked
    here too, so no caller can queue a job that is bound to fail."""
    check_file_type(export_format, file_type)
    export = Export.objects.create(
        owner=user if getattr(user, "is_authenticated", False) else None,
        export_format=export_format,
        filters=filters,
        file_type=file_type,
    )
    log_action(user, "export.request", export, format=export_format, file_type=file_type, filters=filters)
    return export


def request_export(
    user: Any, export_format: str, filters: dict[str, Any], file_type: str = "jsonl"
) -> Export:
    """Create the job row and queue it on the ``exports`` queue once committed (the page and the API)."""
    with transaction.atomic():
        export = _create_export(user, export_format, filters, file_type)
        enqueue(export)
    return export


def export_now(user: Any, export_format: str, filters: dict[str, Any], file_type: str = "jsonl") -> Export:
    """Create the job row and run the job in this process (the command line): the same temporary file,
    hash and row as on a worker. Exceptions propagate after the row records the failure."""
    return run_export_job(_create_export(user, export_format, filters, file_type).pk)


def run_export_job(export_id: int) -> Export:
    """The worker's job: write a temporary file, then publish it with its hash (core.jobs.runner:
    a failure is on the row and the temporary file is discarded)."""
    return run_job(Export, export_id, _execute)


def _execute(export: Export) -> Export:
    handle, temp_name = tempfile.mkstemp(dir=export_dir(), prefix=part_prefix(export.pk), suffix=".part")
    # A real file: the Parquet writer needs the whole file API (tell, flush, closed), not a wrapper.
    with os.fdopen(handle, "wb") as out, _progress_recorder(export.pk) as on_progress:
        count = write_rows(export.export_format, export.filters, out, on_progress, export.file_type)
    digest = file_sha256(Path(temp_name))  # of the very bytes the download will serve
    file_name = published_name(export.pk, f"{export.export_format}.{export.file_type}")
    get_storage(EXPORTS).publish_file(file_name, Path(temp_name))  # whole, or not at all
    return export.finish(Status.DONE, progress=count, row_count=count, file_name=file_name, sha256=digest)
