"""Time sheets: each person's active time per day, the work done, and researchers' corrections.

Active time is the union of the person's active spans (``workforce.activity``: what the task and browsing
pages recorded while visible and in use), cut at midnight in the site's time zone: two tabs, or a task and a
browsing episode open at once, count once. Time on both at once counts as demonstration time, so the task
and demonstration columns add up to the active time. A day holds at most 24 hours, corrections included.
Work done (tasks, demonstrations) counts on the local day it was started."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from annotation.models import (
    ActiveKind,
    ActiveSpan,
    Assignment,
    AssignmentStatus,
    Episode,
    EpisodeStatus,
    TimeCorrection,
)
from annotation.models.demonstrations import EpisodeKind
from annotation.workforce.intervals import Interval, minus, seconds_by_day, union

DAY_SECONDS = 24 * 3600.0  # the most a day holds, corrections included


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
        """Recorded plus corrected, never under zero nor over 24 hours (corrections are refused that would
        take it there; time recorded after a correction may still reach the limit)."""
        return min(DAY_SECONDS, max(0.0, self.recorded_seconds + self.corrected_seconds))


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
    ids = None if users is None else list(users)
    if ids is not None:
        tasks, episodes = tasks.filter(labeler_id__in=ids), episodes.filter(user_id__in=ids)
        corrections = corrections.filter(user_id__in=ids)
    for found in tasks.values("labeler_id", "day").annotate(
        done=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
        late=Count("pk", filter=Q(status=AssignmentStatus.LATE)),
        skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
    ):
        day = row(found["labeler_id"], found["day"])
        day.tasks, day.late, day.skipped = found["done"], found["late"], found["skipped"]
    for found in episodes.values("user_id", "day").annotate(
        done=Count("pk", filter=Q(status=EpisodeStatus.FINISHED)),
        skipped=Count("pk", filter=Q(status=EpisodeStatus.SKIPPED)),
    ):
        day = row(found["user_id"], found["day"])
        day.demonstrations, day.demonstrations_skipped = found["done"], found["skipped"]
    for (user_id, day), (task_seconds, demonstration_seconds) in _active_seconds(start, end, ids).items():
        found = row(user_id, day)
        found.task_seconds, found.demonstration_seconds = task_seconds, demonstration_seconds
    for correction in corrections.select_related("by").order_by("day", "id"):
        day = row(correction.user_id, correction.day)
        day.corrected_seconds += correction.seconds
        day.corrections.append(correction)
    return [rows[key] for key in sorted(rows)]


def _active_seconds(
    start: date, end: date, users: list[int] | None
) -> dict[tuple[int, date], tuple[float, float]]:
    """Per person and day from ``start`` to ``end``, their task and demonstration seconds: the union of
    their spans of each kind, less, for tasks, the time they were also demonstrating."""
    zone = timezone.get_current_timezone()
    spans = ActiveSpan.objects.filter(
        ended_at__gt=datetime.combine(start, time.min, tzinfo=zone),
        started_at__lt=datetime.combine(end + timedelta(days=1), time.min, tzinfo=zone),
    )
    if users is not None:
        spans = spans.filter(user_id__in=users)
    people: dict[int, dict[str, list[Interval]]] = defaultdict(lambda: defaultdict(list))
    for user_id, kind, started_at, ended_at in spans.values_list("user_id", "kind", "started_at", "ended_at"):
        people[user_id][kind].append((started_at, ended_at))
    found: dict[tuple[int, date], tuple[float, float]] = {}
    for user_id, kinds in people.items():
        demonstrating = union(kinds[ActiveKind.DEMONSTRATION])
        tasks = seconds_by_day(minus(union(kinds[ActiveKind.TASK]), demonstrating), zone)
        demonstrations = seconds_by_day(demonstrating, zone)
        for day in tasks.keys() | demonstrations.keys():
            if start <= day <= end:
                found[user_id, day] = (tasks.get(day, 0.0), demonstrations.get(day, 0.0))
    return found


def seconds_by_user(start: date, end: date, users: Iterable[int] | None = None) -> dict[int, float]:
    """Total time (recorded plus corrected) per person over the days from ``start`` to ``end``."""
    totals: dict[int, float] = defaultdict(float)
    for day in days(start, end, users):
        totals[day.user_id] += day.total_seconds
    return dict(totals)


def this_week() -> tuple[date, date]:
    today = timezone.localdate()
    return week_start(today), today
