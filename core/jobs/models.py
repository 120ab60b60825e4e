"""The state every job's row has, and the bookkeeping every job does on it alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Self

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.permissions import ResearchTeamQuerySet

ERROR_LIMIT = 4000  # characters of an error kept on the row (the worker's log has the rest)


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


FINISHED = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


class JobError(Exception):
    """A failure whose message is the whole reason, for the row as it is (bad data named by line, say):
    the job ends failed with it and the worker logs no traceback."""


class Cancelled(Exception):
    """Raised by a job that saw its cancel flag: it ends cancelled, keeping ``fields`` on its row."""

    def __init__(self, **fields: Any) -> None:
        super().__init__("cancelled")
        self.fields = fields


class JobRow(models.Model):
    """What every job's row has: who asked, the status a worker moves it through, the cancel flag it reads,
    its log, the error it failed with, when it was asked for, started, last seen alive and expected to
    end. ``progress_fields`` names the row's (done, total) counters.

    Each job model also says how its job is sent and cleaned up: ``job_name`` (as logs and the sweeper's
    report name it), ``task_name``, ``queue`` and ``task_key`` (the task's keyword argument: the row's
    primary key), and ``discard_partial`` (what its worker half wrote, when it died or failed)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Stamped by the running worker (core.jobs.heartbeat)"
    )
    estimated_end_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="While it runs: when its worker expects it to end (core.progress)",
    )

    objects = ResearchTeamQuerySet.as_manager()

    job_name: ClassVar[str]
    task_name: ClassVar[str]
    queue: ClassVar[str]
    task_key: ClassVar[str]
    progress_fields: ClassVar[tuple[str, str]]

    class Meta:
        abstract = True
        ordering = ("-created_at", "-id")

    @classmethod
    def discard_partial(cls, pk: int) -> None:
        """Remove what row ``pk``'s worker had half written (its worker died, or the job failed)."""

    @classmethod
    def resume_orphan(cls, rows: models.QuerySet, reason: str) -> bool:
        """Queue the orphan in ``rows`` (its worker died of ``reason``) again to continue from a checkpoint,
        when this kind can and the row's settings ask for it: True when it was (one conditional update).
        Kinds that cannot continue fail instead (core.jobs.sweeper)."""
        return False

    @property
    def percent(self) -> int:
        if self.status == JobStatus.DONE:
            return 100
        done, total = (getattr(self, name) for name in self.progress_fields)
        return int(100 * done / total) if total else 0

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    # The bookkeeping every job does on its row: by ``update`` on the row's pk, never ``save``, so that a
    # worker's write does not undo the cancel flag a page set meanwhile (or the other way round).

    @classmethod
    def claim(cls, pk: int) -> bool:
        """Queued to running, for one worker only: a redelivered job finds its row no longer queued."""
        queued = cls.objects.filter(pk=pk, status=JobStatus.QUEUED)
        now = timezone.now()
        return bool(queued.update(status=JobStatus.RUNNING, started_at=now, heartbeat_at=now))

    def request_cancel(self) -> None:
        """A queued job is cancelled at once; a running one when its worker next reads the flag."""
        rows = type(self).objects.filter(pk=self.pk)
        rows.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).update(cancel_requested=True)
        rows.filter(status=JobStatus.QUEUED).update(status=JobStatus.CANCELLED, finished_at=timezone.now())

    def cancel_was_requested(self) -> bool:
        return type(self).objects.filter(pk=self.pk, cancel_requested=True).exists()

    def append_log(self, line: str) -> None:
        self.log += f"{timezone.now():%H:%M:%S} {line}\n"
        type(self).objects.filter(pk=self.pk).update(log=self.log)

    def finish(self, status: str, **fields: Any) -> Self:
        """Ended (done, cancelled or failed) with ``fields`` written alongside; the row as now stored."""
        ended = {"status": status, "finished_at": timezone.now(), "estimated_end_at": None}
        type(self).objects.filter(pk=self.pk).update(**(fields | ended))
        self.refresh_from_db()
        return self

    def fail(self, exc: BaseException, **fields: Any) -> Self:
        """Failed with the exception as its reason (the worker's log has the traceback)."""
        reason = str(exc) if isinstance(exc, JobError) else f"{type(exc).__name__}: {exc}"
        return self.finish(JobStatus.FAILED, error=reason[:ERROR_LIMIT], **fields)

    # What a failed job keeps on its row besides the error (the loss curve so far, the scores so far): the
    # job registers a function that tells, since only it knows how far it got.
    _kept: Callable[[], dict[str, Any]] | None = None

    def keep_on_failure(self, fields: Callable[[], dict[str, Any]]) -> None:
        self._kept = fields

    def kept_on_failure(self) -> dict[str, Any]:
        return self._kept() if self._kept else {}
