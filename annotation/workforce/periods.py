"""Which days a time sheet covers, read from a query string (the console page, its CSV, the API and the
command): a week (``week``: any day of it, the sheet runs Monday to Sunday), a range (``start`` and
``end``, both included, at most ``MAX_DAYS`` days), or by default this week. A bad value is a
``PeriodError`` naming its field, for a 400 that says what to send; nothing else is ever raised."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from annotation.workforce.timesheets import week_start

MAX_DAYS = 92  # a quarter: a range longer than that is a report, not a time sheet
# Days outside these are typing mistakes, and far enough from the calendar's ends that a week before or
# after is still a date.
FIRST_DAY, LAST_DAY = date(2000, 1, 1), date(2100, 12, 31)
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class PeriodError(ValueError):
    """A query that names no period: ``field`` is the parameter at fault, ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@dataclass(frozen=True)
class Period:
    start: date
    end: date
    is_week: bool

    @property
    def previous(self) -> Period:
        """The week before (for a range: the week before its first day's week)."""
        return week_of(week_start(self.start) - timedelta(days=7))

    @property
    def next(self) -> Period:
        return week_of(week_start(self.start) + timedelta(days=7))

    @property
    def query(self) -> str:
        """The query string that names this period (for links and the CSV)."""
        if self.is_week:
            return f"week={self.start.isoformat()}"
        return f"start={self.start.isoformat()}&end={self.end.isoformat()}"

    @property
    def label(self) -> str:
        prefix = "Week of " if self.is_week else ""
        return f"{prefix}{self.start:%a %d %b %Y} to {self.end:%a %d %b %Y}"


def week_of(day: date) -> Period:
    monday = week_start(day)
    return Period(monday, monday + timedelta(days=6), is_week=True)


def parse_day(raw: object, field: str) -> date:
    """A day written YYYY-MM-DD (nothing else: ``date.fromisoformat`` also takes week dates and
    ``20261130``, which nobody means), between ``FIRST_DAY`` and ``LAST_DAY``."""
    text = raw if isinstance(raw, str) else ""
    try:
        day = date.fromisoformat(text) if _ISO_DAY.fullmatch(text) else None
    except ValueError:
        day = None
    if day is None:
        shown = text[:30] if text.isprintable() else "that"
        raise PeriodError(
            field, f"'{field}' must be a day written YYYY-MM-DD, such as 2026-11-30, not '{shown}'."
        )
    if not FIRST_DAY <= day <= LAST_DAY:
        raise PeriodError(field, f"'{field}' must be a day from {FIRST_DAY} to {LAST_DAY}.")
    return day


def period_from(query: Mapping[str, object], today: date) -> Period:
    """The period a query names (``week``, or ``start`` and ``end``), by default ``today``'s week."""
    given = {name: query.get(name) for name in ("week", "start", "end") if query.get(name) not in (None, "")}
    if "week" in given:
        if "start" in given or "end" in given:
            raise PeriodError("week", "Give a 'week' or a 'start' and an 'end', not both.")
        return week_of(parse_day(given["week"], "week"))
    if not given:
        return week_of(today)
    for name in ("start", "end"):
        if name not in given:
            raise PeriodError(name, f"'{name}' is missing: a range needs both 'start' and 'end'.")
    start, end = parse_day(given["start"], "start"), parse_day(given["end"], "end")
    if end < start:
        raise PeriodError("end", "'end' is before 'start'.")
    if (end - start).days + 1 > MAX_DAYS:
        raise PeriodError(
            "end", f"A time sheet covers at most {MAX_DAYS} days; this range has {(end - start).days + 1}."
        )
    return Period(start, end, is_week=False)
