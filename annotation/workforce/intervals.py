"""Stretches of time as (start, end) pairs of aware datetimes: their union, one less another, and the seconds
they cover on each local day. Plain Python: time sheets join a person's active spans with these."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta, tzinfo

Interval = tuple[datetime, datetime]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The same time as sorted intervals that neither overlap nor touch."""
    joined: list[Interval] = []
    for start, end in sorted(intervals):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined


def minus(kept: list[Interval], taken: list[Interval]) -> list[Interval]:
    """``kept`` less the time in ``taken`` (both as ``union`` gives them: sorted, so one pass over each)."""
    left: list[Interval] = []
    first = 0  # the first of ``taken`` that may still cut: those before it ended before this interval starts
    for start, end in kept:
        while first < len(taken) and taken[first][1] <= start:
            first += 1
        for index in range(first, len(taken)):
            cut_start, cut_end = taken[index]
            if cut_start >= end:
                break
            if cut_start > start:
                left.append((start, cut_start))
            start = max(start, cut_end)
        if start < end:
            left.append((start, end))
    return left


def seconds_by_day(intervals: Iterable[Interval], zone: tzinfo) -> dict[date, float]:
    """The seconds the intervals cover on each day in ``zone``, cut at its midnights (a 23- or 25-hour day
    where the clocks change is as long as it really is)."""
    seconds: dict[date, float] = defaultdict(float)
    for start, end in intervals:
        while start < end:
            day = start.astimezone(zone).date()
            # In UTC: arithmetic between two datetimes of one zone would ignore a change of the clocks.
            midnight = datetime.combine(day + timedelta(days=1), time.min, tzinfo=zone).astimezone(UTC)
            cut = min(end, midnight)
            seconds[day] += (cut - start).total_seconds()
            start = cut
    return dict(seconds)
