"""People's active time as stretches of wall-clock time, which time sheets join per person: a person working
in two tabs, or on a task and a browsing episode at once, is at work once (``workforce.activity`` records
them, ``workforce.timesheets`` reads them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ActiveKind(models.TextChoices):
    TASK = "task", "Feedback task"
    DEMONSTRATION = "demonstration", "Demonstration"


class ActiveSpan(models.Model):
    """From the first to the last of a run of heartbeats, each less than the idle limit after the one before,
    from the pages of one kind a person had open (every tab extends the same span)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=ActiveKind.choices)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()

    class Meta:
        ordering = ("user", "started_at", "id")
        indexes = [
            models.Index(fields=("user", "kind", "ended_at"), name="active_span_latest"),
            models.Index(fields=("ended_at",), name="active_span_ended"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ended_at__gte=models.F("started_at")), name="active_span_ends_after_start"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind} {self.started_at:%Y-%m-%d %H:%M:%S}-{self.ended_at:%H:%M:%S}"
