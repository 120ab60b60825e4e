"""The job sweeper: no job stays "running" for a worker that died, none stays "queued" for a message the
broker lost.

- An orphan (a running row whose heartbeat stopped: ``core.jobs.heartbeat``) is failed with the
  reason, and what its worker had half written is discarded (its model's ``discard_partial``: a training
  run's folder, an export's temporary file, a corpus import's upload). Failing rather than re-running: a
  job that killed its worker (out of memory) would kill the next one too, and the researcher sees why and
  asks again. The exception is a job that can continue from a checkpoint and whose settings ask for it
  (its model's ``resume_orphan``: a training run with ``resume_attempts`` left): it is queued again and
  sent, and goes on from its last checkpoint; its attempts are counted, so a job that kills every worker
  ends failed all the same.
- A queued row older than JOB_REQUEUE_AFTER whose queue holds no message (Redis restarted without its data)
  is sent again. A message that was not lost after all only finds its row claimed and is dropped: every job
  claims its row (queued to running) before it starts, so a job never runs twice.

Every worker sweeps when it starts and every JOB_SWEEP_SECONDS after (``start_sweeping``, from the
``worker_ready`` signal), so no beat process is needed; ``manage.py sweep_jobs`` sweeps once. Sweeps from
several workers at once are harmless: each change is a conditional update that one of them wins.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from core.jobs.heartbeat import WORKER_STOPPED, orphans
from core.jobs.models import JobRow, JobStatus
from core.jobs.queueing import send
from core.ops import broker

logger = logging.getLogger(__name__)


def job_models() -> list[type[JobRow]]:
    """Every kind of job row the installed apps define (found, not listed: a new kind needs no entry)."""
    return [model for model in apps.get_models() if issubclass(model, JobRow)]


FAILED, RESUMED = "failed", "resumed"


def reap(model: type[JobRow], pk: int, now: datetime | None = None) -> str:
    """If row ``pk`` is an orphan (one conditional update: one reaper wins): resume it when its kind and
    settings allow (queued and sent again), else fail it and discard what its worker half wrote. What
    this call did (FAILED, RESUMED) or "" when it did nothing."""
    now = now or timezone.now()
    rows = orphans(model.objects.filter(pk=pk), now)
    since = rows.values_list("heartbeat_at", "started_at").first()
    if since is None:
        return ""
    last = since[0] or since[1]
    reason = WORKER_STOPPED
    if last is not None:
        reason += f"; no heartbeat since {timezone.localtime(last):%Y-%m-%d %H:%M:%S}"
    if model.resume_orphan(rows, reason):
        send(model, pk)
        logger.warning("%s %s queued again to continue from its checkpoint: %s", model.job_name, pk, reason)
        return RESUMED
    if not rows.update(status=JobStatus.FAILED, error=reason, finished_at=now):
        return ""
    model.discard_partial(pk)
    logger.warning("%s %s failed: %s", model.job_name, pk, reason)
    return FAILED


def queue_length(queue: str) -> int | None:
    """Messages waiting in ``queue`` on the broker, or None when the broker cannot be asked."""
    try:
        return broker.queue_lengths([queue])[queue]
    except Exception as exc:  # any transport error: the sweeper must not die of a broker outage
        logger.warning("broker not reachable for the length of %s: %s", queue, exc)
        return None


def requeue_lost(model: type[JobRow], now: datetime | None = None) -> list[int]:
    """Send the task of every queued row of ``model`` older than JOB_REQUEUE_AFTER again, when its queue
    holds no message at all (so the row's message cannot be waiting there). The rows' ids."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.JOB_REQUEUE_AFTER)
    waiting = list(
        model.objects.filter(status=JobStatus.QUEUED, created_at__lt=cutoff).values_list("pk", flat=True)
    )
    if not waiting or queue_length(model.queue) != 0:
        return []
    for pk in waiting:
        send(model, pk)
        logger.warning("%s %s sent again: its queue %s had lost its message", model.job_name, pk, model.queue)
    return waiting


@dataclass
class SweepReport:
    failed: dict[str, list[int]] = field(default_factory=dict)
    requeued: dict[str, list[int]] = field(default_factory=dict)
    resumed: dict[str, list[int]] = field(default_factory=dict)


def sweep(now: datetime | None = None) -> SweepReport:
    """One pass over every kind of job: orphans failed, lost queued jobs sent again."""
    now = now or timezone.now()
    report = SweepReport()
    for model in job_models():
        stale = list(orphans(model.objects.all(), now).values_list("pk", flat=True))
        outcomes = [(pk, reap(model, pk, now)) for pk in stale]
        for outcome, found in ((FAILED, report.failed), (RESUMED, report.resumed)):
            if pks := [pk for pk, done in outcomes if done == outcome]:
                found[model.job_name] = pks
        if requeued := requeue_lost(model, now):
            report.requeued[model.job_name] = requeued
    return report


def start_sweeping(every: float | None = None) -> threading.Thread:
    """Sweep now and then every ``every`` seconds (JOB_SWEEP_SECONDS) in a daemon thread of this worker."""
    every = settings.JOB_SWEEP_SECONDS if every is None else every

    def loop() -> None:
        while True:
            try:
                sweep()
            except DatabaseError as exc:  # the database restarting: try again at the next sweep
                logger.warning("job sweep failed: %s", exc)
            finally:
                connection.close()
            time.sleep(every)

    thread = threading.Thread(target=loop, name="job-sweeper", daemon=True)
    thread.start()
    return thread
