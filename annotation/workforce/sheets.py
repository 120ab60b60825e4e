"""A time sheet as the page, the CSV, the API and the command show it: each person's days
(``timesheets.days``) under their user name, with their totals over the period, and the CSV for payment."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model

from annotation.workforce.corrections import minutes_text
from annotation.workforce.periods import Period
from annotation.workforce.timesheets import Day, days

# What each day counts, in the CSV's order (after user and day); seconds are recorded active time,
# corrections, and their sum (never below zero on a day).
SECONDS = ("task_seconds", "demonstration_seconds", "corrected_seconds", "total_seconds")
COUNTS = ("tasks", "late", "skipped", "demonstrations", "demonstrations_skipped")
CSV_COLUMNS = ("user", "day", *SECONDS, *COUNTS, "corrections")
# A spreadsheet runs a cell that starts with one of these as a formula; user names may start with
# "@", "+" or "-" and reasons with anything: such text gets a leading apostrophe.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class PersonSheet:
    """One person's days in the period (only days with work or a correction) and their totals."""

    user_id: int
    username: str
    days: list[Day]

    def total(self, figure: str) -> float:
        return sum(getattr(day, figure) for day in self.days)

    @property
    def totals(self) -> dict[str, float]:
        return {figure: self.total(figure) for figure in (*SECONDS, *COUNTS)}


def sheet(period: Period, users: Iterable[int] | None = None) -> list[PersonSheet]:
    """Everyone's days in ``period`` (or those of ``users``), by user name."""
    people: dict[int, list[Day]] = {}
    for day in days(period.start, period.end, users):
        people.setdefault(day.user_id, []).append(day)
    names = dict(get_user_model().objects.filter(pk__in=people).values_list("pk", "username"))
    sheets = [
        PersonSheet(user_id, names.get(user_id, f"#{user_id}"), found) for user_id, found in people.items()
    ]
    return sorted(sheets, key=lambda person: (person.username.lower(), person.user_id))


def hours_minutes(seconds: float) -> str:
    """Seconds as h:mm, to the nearest minute ("7:05"; "-0:30" for a correction taking time away)."""
    minutes = int(abs(seconds) / 60 + 0.5)  # half a minute up (round() would go to the even one)
    return f"{'-' if seconds < 0 and minutes else ''}{minutes // 60}:{minutes % 60:02d}"


def correction_words(day: Day) -> str:
    """A day's corrections in one line: "+30 min: forgot to stop the timer; -15 min: a break"."""
    return "; ".join(f"{minutes_text(row.seconds)}: {row.reason}" for row in day.corrections)


def csv_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(person: PersonSheet, day: Day) -> list[Any]:
    seconds = [round(getattr(day, figure), 1) for figure in SECONDS]
    counts = [getattr(day, figure) for figure in COUNTS]
    row = [person.username, day.day.isoformat(), *seconds, *counts, correction_words(day)]
    return [csv_cell(value) for value in row]


def write_csv(out: Any, people: Iterable[PersonSheet]) -> None:
    """One line per person per day (``CSV_COLUMNS``), into ``out`` (anything with ``write``)."""
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for person in people:
        for day in person.days:
            writer.writerow(csv_row(person, day))


def day_data(person: PersonSheet, day: Day) -> dict[str, Any]:
    """A day for the API: the CSV's figures, and each correction with who made it and when."""
    return {
        "user": person.username,
        "day": day.day,
        **{figure: round(getattr(day, figure), 1) for figure in SECONDS},
        **{figure: getattr(day, figure) for figure in COUNTS},
        "corrections": [correction_data(row) for row in day.corrections],
    }


def correction_data(row: Any) -> dict[str, Any]:
    return {
        "id": row.pk,
        "seconds": row.seconds,
        "reason": row.reason,
        "by": row.by.get_username() if row.by else None,
        "created_at": row.created_at,
    }


def totals_data(person: PersonSheet) -> dict[str, Any]:
    totals = person.totals
    return {
        "user": person.username,
        **{figure: round(totals[figure], 1) for figure in SECONDS},
        **{figure: int(totals[figure]) for figure in COUNTS},
        "days": len(person.days),
    }
