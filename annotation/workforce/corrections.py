"""A researcher's correction to someone's time on one day (the console page and the API both come here).
A correction is a row of its own, added to the recorded active time, never edited nor deleted: a mistaken
one is undone by another, so the time sheet keeps what was paid and why. Each one is in the audit log.
Nobody corrects their own hours, and only a superuser a researcher's or an administrator's
(``workforce.authority``)."""

from __future__ import annotations

from datetime import date

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from annotation.models import TimeCorrection
from annotation.workforce.authority import check_may_act_on
from annotation.workforce.periods import FIRST_DAY
from annotation.workforce.timesheets import DAY_SECONDS, days
from core.models import log_action
from core.permissions import AnyUser, Role, has_role

MAX_MINUTES = 24 * 60  # a day, either way
MAX_REASON = 1000
ACTION = "timesheet.correct"
# Whose time is kept: the people paid for work (a researcher's own judgements are not on a time sheet).
WORKER_ROLES = (Role.LABELER, Role.DEMONSTRATOR)


class CorrectionError(ValueError):
    """A correction refused: ``field`` is the input at fault, ``message`` says why. Nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def minutes_text(seconds: float) -> str:
    """A correction as a page says it: "+30 min", "-1 h 15 min"."""
    minutes = int(abs(seconds) / 60 + 0.5)  # half a minute up (round() would go to the even one)
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(minutes, 60)
    if hours:
        return f"{sign}{hours} h" + (f" {rest} min" if rest else "")
    return f"{sign}{rest} min"


def correct(by: AnyUser, username: str, day: date, minutes: int, reason: str) -> TimeCorrection:
    """Add ``minutes`` (signed) to ``username``'s time on ``day``, for ``reason``; ``CorrectionError``
    when the person is not a labeler or demonstrator, the day is in the future, the reason is empty or too
    long, the correction is 0 or over a day either way, or the day's total would fall below zero or go over
    24 hours; ``authority.NotYourCall`` when ``by`` may not act on the person (their own hours, for one)."""
    reason = (reason or "").strip()
    if not reason:
        raise CorrectionError("reason", "Say why: a correction needs a reason.")
    if len(reason) > MAX_REASON:
        raise CorrectionError("reason", f"The reason is {len(reason)} characters; at most {MAX_REASON}.")
    if minutes == 0:
        raise CorrectionError("minutes", "A correction of 0 minutes changes nothing.")
    if abs(minutes) > MAX_MINUTES:
        raise CorrectionError(
            "minutes", f"A correction is at most {MAX_MINUTES} minutes (24 hours) either way."
        )
    if day > timezone.localdate():
        raise CorrectionError("day", f"{day} is in the future: only time already worked can be corrected.")
    if day < FIRST_DAY:
        raise CorrectionError("day", f"{day} is before {FIRST_DAY}, when time sheets begin.")
    if not isinstance(username, str) or "\x00" in username or len(username) > 150:
        raise CorrectionError("user", "Name a labeler or demonstrator by their user name.")
    with transaction.atomic():
        # The person's row, locked: two corrections of one person at once cannot both pass the check below.
        person = get_user_model().objects.select_for_update().filter(username=username).first()
        if person is None or not any(has_role(person, role) for role in WORKER_ROLES):
            raise CorrectionError("user", f"No labeler or demonstrator is called '{username[:150]}'.")
        check_may_act_on(by, person)
        before = sum(row.recorded_seconds + row.corrected_seconds for row in days(day, day, [person.pk]))
        seconds = minutes * 60.0
        if before + seconds < 0:
            raise CorrectionError(
                "minutes",
                f"{person.get_username()} has {minutes_text(before).lstrip('+')} on {day}; taking away "
                f"{minutes_text(seconds).lstrip('-')} would leave less than nothing.",
            )
        if before + seconds > DAY_SECONDS:
            raise CorrectionError(
                "minutes",
                f"{person.get_username()} has {minutes_text(before).lstrip('+')} on {day}; adding "
                f"{minutes_text(seconds).lstrip('+')} would make the day longer than 24 hours.",
            )
        correction = TimeCorrection.objects.create(
            user=person, day=day, seconds=seconds, reason=reason, by=by
        )
        log_action(
            by,
            ACTION,
            correction,
            user=person.get_username(),
            day=day.isoformat(),
            seconds=seconds,
            reason=reason,
            total_before=before,
        )
    return correction
