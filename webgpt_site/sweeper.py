"""The job sweeper: no job stays "running" for a worker that died, none stays "queued" for a message the
broker lost.

- An orphan (a running row whose heartbeat stopped: ``webgpt_site.heartbeat``) is failed with the reason,
  and what its worker had half written is discarded (a training run's folder, an export's temporary file, a
  corpus import's upload). Failing rather than re-running: a job that killed its worker (out of memory) would
  kill the next one too, and the researcher sees why and asks again.
- A queued row older than JOB_REQUEUE_AFTER whose queue holds no message (Redis restarted without its data)
  is sent again. A message that was not lost after all only finds its row claimed and is dropped: every job
  claims its row (queued to running) before it starts, so a job never runs twice.

Every worker sweeps when it starts and every JOB_SWEEP_SECONDS after (``start_sweeping``, from the
``worker_ready`` signal), so no beat process is needed; ``manage.py sweep_jobs`` sweeps once. Sweeps from
several workers at once are harmless: each change is a conditional update that one of them wins.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Model
from django.utils import timezone

from webgpt_site.heartbeat import WORKER_STOPPED, is_orphan, orphans
from webgpt_site.ops import broker

logger = logging.getLogger(__name__)


def _nothing(pk: int) -> None:
    pass


def _discard_training_output(pk: int) -> None:
    """The model folder the run was writing (when this machine ran it) and whatever of it was being
    published (objects in the bucket, and a file's unfinished upload: a model is registered only once all
    of it is there)."""
    from training.checkpoints import storage_name
    from training.runs.jobs import output_dir
    from webgpt_site.storage import MODELS, get_storage

    shutil.rmtree(output_dir(pk), ignore_errors=True)
    get_storage(MODELS).delete_folder(storage_name(pk))  # unfinished uploads to it included


def _discard_export_part(pk: int) -> None:
    from annotation.exports.service import discard_partial_files

    discard_partial_files(pk)


def _discard_import_upload(pk: int) -> None:
    from browser.import_jobs import discard_upload

    discard_upload(pk)


@dataclass(frozen=True)
class JobKind:
    """A kind of job row: where its rows are, how its task is sent, what a dead worker leaves behind."""

    name: str
    model: Callable[[], type[Model]]
    task: str
    queue: str
    key: str  # the task's keyword argument: the row's primary key
    discard: Callable[[int], None] = field(default=_nothing)


def _model(path: str) -> Callable[[], type[Model]]:
    from django.apps import apps

    return lambda: apps.get_model(path)


JOB_KINDS = (
    JobKind("training run", _model("training.TrainingRun"), "training.run_training", "training", "run_id",
            _discard_training_output),
    JobKind("sampling run", _model("training.SamplingRun"), "training.run_sampling", "sampling", "run_id"),
    JobKind("proxy evaluation", _model("training.ProxyEvaluation"), "training.run_proxy_evaluation",
            "training", "evaluation_id"),
    JobKind("export", _model("annotation.Export"), "annotation.run_export", "exports", "export_id",
            _discard_export_part),
    JobKind("corpus import", _model("browser.CorpusImport"), "browser.run_corpus_import", "exports",
            "import_id", _discard_import_upload),
)  # fmt: skip


def kind_of(model: type[Model]) -> JobKind:
    return next(kind for kind in JOB_KINDS if kind.model() is model)


def reap(kind: JobKind, pk: int, now: datetime | None = None) -> bool:
    """Fail row ``pk`` if it is an orphan (one conditional update: one reaper wins) and discard what its
    worker half wrote. True when this call failed it."""
    now = now or timezone.now()
    rows = orphans(kind.model().objects.filter(pk=pk), now)
    since = rows.values_list("heartbeat_at", "started_at").first()
    if since is None:
        return False
    last = since[0] or since[1]
    reason = WORKER_STOPPED
    if last is not None:
        reason += f"; no heartbeat since {timezone.localtime(last):%Y-%m-%d %H:%M:%S}"
    if not rows.update(status="failed", error=reason, finished_at=now):
        return False
    kind.discard(pk)
    logger.warning("%s %s failed: %s", kind.name, pk, reason)
    return True


def redelivered(row: Model) -> Model:
    """What a job does with a message whose row it could not claim: an orphan (its worker died and no
    sweep has seen it yet) is failed now; a finished row, or one another worker is running (a message sent
    again by a sweep, or redelivered by Redis), is left as it is. The row as now stored."""
    if is_orphan(row):
        reap(kind_of(type(row)), row.pk)
        row.refresh_from_db()
    return row


def queue_length(queue: str) -> int | None:
    """Messages waiting in ``queue`` on the broker, or None when the broker cannot be asked."""
    try:
        return broker.queue_lengths([queue])[queue]
    except Exception as exc:  # any transport error: the sweeper must not die of a broker outage
        logger.warning("broker not reachable for the length of %s: %s", queue, exc)
        return None


def requeue_lost(kind: JobKind, now: datetime | None = None) -> list[int]:
    """Send the task of every queued row of ``kind`` older than JOB_REQUEUE_AFTER again, when its queue
    holds no message at all (so the row's message cannot be waiting there). The rows' ids."""
    from webgpt_site.celery import app

    cutoff = (now or timezone.now()) - timedelta(seconds=settings.JOB_REQUEUE_AFTER)
    waiting = list(
        kind.model().objects.filter(status="queued", created_at__lt=cutoff).values_list("pk", flat=True)
    )
    if not waiting or queue_length(kind.queue) != 0:
        return []
    for pk in waiting:
        app.send_task(kind.task, kwargs={kind.key: pk}, queue=kind.queue)
        logger.warning("%s %s sent again: its queue %s had lost its message", kind.name, pk, kind.queue)
    return waiting


@dataclass
class SweepReport:
    failed: dict[str, list[int]] = field(default_factory=dict)
    requeued: dict[str, list[int]] = field(default_factory=dict)


def sweep(now: datetime | None = None) -> SweepReport:
    """One pass over every kind of job: orphans failed, lost queued jobs sent again."""
    now = now or timezone.now()
    report = SweepReport()
    for kind in JOB_KINDS:
        stale = list(orphans(kind.model().objects.all(), now).values_list("pk", flat=True))
        failed = [pk for pk in stale if reap(kind, pk, now)]
        if failed:
            report.failed[kind.name] = failed
        if requeued := requeue_lost(kind, now):
            report.requeued[kind.name] = requeued
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
