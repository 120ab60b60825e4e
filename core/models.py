"""Platform-wide records: the audit log, worker health checks and API tokens. Their tables keep the names
they had in the project package (migrations core/0001 and webgpt_site/0004 moved the models, not the data)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEntry(models.Model):
    """Who did what to which object, written by service functions inside their transaction."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=100)
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "webgpt_site_auditentry"
        ordering = ("-created_at", "-id")
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"


def log_action(actor: Any, action: str, obj: models.Model | None = None, **data: Any) -> AuditEntry:
    """Record an action; ``actor`` may be None for command-line and system actions."""
    return AuditEntry.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        action=action,
        object_type=obj._meta.label if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        data=data,
    )


class WorkerPing(models.Model):
    """A round trip through one Celery queue: created by the web app, answered by a worker."""

    queue = models.CharField(max_length=30)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    worker_hostname = models.CharField(max_length=255, blank=True)

    class Meta:
        db_table = "webgpt_site_workerping"
        ordering = ("-requested_at", "-id")

    # After this long without an answer, the queue is reported as having no worker, unless it is busy.
    PATIENCE = timedelta(seconds=30)
    # Set by ``workers.latest_pings``: a job of this queue is running with a live heartbeat, so its worker
    # is alive and the ping waits behind that job (a worker takes one job at a time).
    busy = False

    def __str__(self) -> str:
        return f"ping {self.queue} #{self.pk}"

    @property
    def state(self) -> str:
        if self.answered_at:
            return "answered"
        if timezone.now() - self.requested_at < self.PATIENCE:
            return "waiting"
        return "busy with a job" if self.busy else "no worker"


class ApiToken(models.Model):
    """A person's token for scripts. Only its SHA-256 is stored (core/api_tokens.py): the token
    itself is shown once, when it is made, and a copy of the database opens nothing."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    digest = models.CharField(max_length=64, unique=True)
    # The token's first characters, so its owner can tell which copy a script holds; far too few to guess
    # the rest from.
    prefix = models.CharField(max_length=8)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "webgpt_site_apitoken"
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
