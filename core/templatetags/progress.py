"""A job's time left in words (core.progress): ``{{ run.estimated_end_at|time_left }}`` where the
worker stores an estimate, ``{% time_left_from job.started_at job.progress job.total %}`` where the page
makes one from the row (the row's progress is written about every second, so the rate stays current)."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from core.progress import estimated_end, time_left_text

register = template.Library()


@register.filter
def time_left(end: datetime | None) -> str:
    return time_left_text(end)


@register.simple_tag
def time_left_from(started: datetime | None, done: int | None, total: int | None) -> str:
    """The time left of a job that started at ``started`` and has done ``done`` of ``total``."""
    if started is None or not done or not total:
        return ""
    now = timezone.now()
    return time_left_text(estimated_end(done, total - done, (now - started).total_seconds(), now), now)
