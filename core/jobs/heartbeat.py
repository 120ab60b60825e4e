"""Liveness of long jobs: while a job runs, a thread of its worker stamps the job's row every
JOB_HEARTBEAT_SECONDS; a running row whose stamp is older than JOB_HEARTBEAT_TIMEOUT belongs to a worker
that died (``kill -9``, out of memory, the machine gone), whatever the broker does with its message (the
embedded broker never redelivers it; Redis does after its visibility timeout, an hour).
``core.jobs.sweeper`` fails such rows with the reason.

Every job row (training, sampling and proxy-evaluation runs, exports, corpus imports) has ``status``,
``started_at`` and ``heartbeat_at`` (``JobRow``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Model, Q, QuerySet
from django.utils import timezone

from core.jobs.models import JobStatus

WORKER_STOPPED = "the worker running this job stopped (killed or restarted)"
logger = logging.getLogger(__name__)


def stale_before(now: datetime | None = None) -> datetime:
    """Rows last stamped before this moment are orphans."""
    return (now or timezone.now()) - timedelta(seconds=settings.JOB_HEARTBEAT_TIMEOUT)


def orphans(rows: QuerySet, now: datetime | None = None) -> QuerySet:
    """The running rows of ``rows`` whose worker stopped stamping them, or never did (a row claimed before
    heartbeats existed)."""
    cutoff = stale_before(now)
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    silent |= Q(heartbeat_at__isnull=True, started_at__isnull=True)
    return rows.filter(silent, status=JobStatus.RUNNING)


def is_orphan(row: Model) -> bool:
    """Whether ``row`` (as just read) is running with no heartbeat for longer than the timeout."""
    last = row.heartbeat_at or row.started_at
    return row.status == JobStatus.RUNNING and (last is None or last < stale_before())


@contextmanager
def beating(model: type[Model], pk: int, every: float | None = None) -> Iterator[None]:
    """Stamp ``model`` row ``pk`` now and then every ``every`` seconds (JOB_HEARTBEAT_SECONDS) until the
    block ends. The stamps come from a thread with its own database connection, so they go on while the
    job's own connection is busy (a long query, an open snapshot) and while torch or tantivy hold the CPU;
    a failed stamp (the database restarting) is logged and retried at the next beat."""
    every = settings.JOB_HEARTBEAT_SECONDS if every is None else every
    rows = model.objects.filter(pk=pk)
    rows.update(heartbeat_at=timezone.now())
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    rows.update(heartbeat_at=timezone.now())
                except DatabaseError as exc:
                    logger.warning("heartbeat of %s %s not stored: %s", model.__name__, pk, exc)
                    connection.close()  # a fresh connection at the next beat
        finally:
            connection.close()  # this thread's connection, not the job's

    thread = threading.Thread(target=beat, name=f"heartbeat-{model.__name__}-{pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 5)
