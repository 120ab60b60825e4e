"""Time sheets: each person's active time per day (what the task and browsing pages record while visible and
in use), the work done, and researchers' corrections. A task's or an episode's active time counts on the
day it was started (in the site's time zone), so a time sheet adds up to exactly the active time stored
(a researcher's reference judgements excepted: they are no one's paid work)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from annotation.models import Assignment, AssignmentStatus, Episode, EpisodeStatus, TimeCorrection
from annotation.models.demonstrations import EpisodeKind


@dataclass
class Day:
    """One person's day."""

    user_id: int
    day: date
    task_seconds: float = 0.0
    demonstration_seconds: float = 0.0
    corrected_seconds: float = 0.0
    tasks: int = 0
    late: int = 0
    skipped: int = 0
    demonstrations: int = 0
    demonstrations_skipped: int = 0
    corrections: list[TimeCorrection] = field(default_factory=list)  # oldest first, ``by`` fetched

    @property
    def recorded_seconds(self) -> float:
        return self.task_seconds + self.demonstration_seconds

    @property
    def total_seconds(self) -> float:
        """Recorded plus corrected, never under zero."""
        return max(0.0, self.recorded_seconds + self.corrected_seconds)


def week_start(day: date) -> date:
    """The Monday of ``day``'s week."""
    return day - timedelta(days=day.weekday())


def days(start: date, end: date, users: Iterable[int] | None = None) -> list[Day]:
    """The days from ``start`` to ``end`` (both included) on which someone worked or was corrected, per
    person, ordered by person then day. ``users`` restricts to those user ids."""
    zone = timezone.get_current_timezone()
    rows: dict[tuple[int, date], Day] = {}

    def row(user_id: int, day: date) -> Day:
        return rows.setdefault((user_id, day), Day(user_id, day))

    tasks = (
        Assignment.objects.exclude(status=AssignmentStatus.REFERENCE)
        .annotate(day=TruncDate("started_at", tzinfo=zone))
        .filter(day__gte=start, day__lte=end)
    )
    episodes = (
        Episode.objects.filter(kind=EpisodeKind.HUMAN)
        .annotate(day=TruncDate("started_at", tzinfo=zone))
        .filter(day__gte=start, day__lte=end)
    )
    corrections = TimeCorrection.objects.filter(day__gte=start, day__lte=end)
    if users is not None:
        ids = list(users)
        tasks, episodes = tasks.filter(labeler_id__in=ids), episodes.filter(user_id__in=ids)
        corrections = corrections.filter(user_id__in=ids)
    for found in tasks.values("labeler_id", "day").annotate(
        seconds=Sum("active_seconds"),
        done=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
        late=Count("pk", filter=Q(status=AssignmentStatus.LATE)),
        skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
    ):
        day = row(found["labeler_id"], found["day"])
        day.task_seconds, day.tasks = found["seconds"] or 0.0, found["done"]
        day.late, day.skipped = found["late"], found["skipped"]
    for found in episodes.values("user_id", "day").annotate(
        seconds=Sum("active_seconds"),
        done=Count("pk", filter=Q(status=EpisodeStatus.FINISHED)),
        skipped=Count("pk", filter=Q(status=EpisodeStatus.SKIPPED)),
    ):
        day = row(found["user_id"], found["day"])
        day.demonstration_seconds, day.demonstrations = found["seconds"] or 0.0, found["done"]
        day.demonstrations_skipped = found["skipped"]
    for correction in corrections.select_related("by").order_by("day", "id"):
        day = row(correction.user_id, correction.day)
        day.corrected_seconds += correction.seconds
        day.corrections.append(correction)
    return [rows[key] for key in sorted(rows)]


def seconds_by_user(start: date, end: date, users: Iterable[int] | None = None) -> dict[int, float]:
    """Total time (recorded plus corrected) per person over the days from ``start`` to ``end``."""
    totals: dict[int, float] = defaultdict(float)
    for day in days(start, end, users):
        totals[day.user_id] += day.total_seconds
    return dict(totals)


def this_week() -> tuple[date, date]:
    today = timezone.localdate()
    return week_start(today), today
