"""The researcher's time sheets page (a week or a range of days: each person's days and totals, links to the
weeks around it), its CSV for payment, and the correction form it carries (``corrections.correct``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotation.workforce.authority import NotYourCall
from annotation.workforce.corrections import (
    MAX_MINUTES,
    MAX_REASON,
    WORKER_ROLES,
    CorrectionError,
    correct,
    minutes_text,
)
from annotation.workforce.periods import FIRST_DAY, MAX_DAYS, Period, PeriodError, period_from, week_of
from annotation.workforce.sheets import PersonSheet, hours_minutes, sheet, write_csv
from annotation.workforce.timesheets import Day
from core.permissions import Role, role_required


def workers() -> list[str]:
    """The user names a correction may name: everyone with the labeler or demonstrator role."""
    names = get_user_model().objects.filter(groups__name__in=[role.value for role in WORKER_ROLES])
    return list(names.order_by("username").values_list("username", flat=True).distinct())


class CorrectionForm(forms.Form):
    user = forms.ChoiceField(label="Person")
    day = forms.DateField(help_text="YYYY-MM-DD; today or earlier")
    minutes = forms.IntegerField(
        min_value=-MAX_MINUTES,
        max_value=MAX_MINUTES,
        help_text="Positive adds time, negative takes it away (at most 24 hours either way)",
    )
    reason = forms.CharField(
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Kept with the correction and in the audit log",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["user"].choices = [("", "Choose a person")] + [(name, name) for name in workers()]
        self.fields["day"].widget = forms.DateInput(
            attrs={"type": "date", "max": timezone.localdate().isoformat()}
        )


def _day_row(day: Day) -> dict[str, Any]:
    return {
        "day": day.day,
        "task_time": hours_minutes(day.task_seconds),
        "demonstration_time": hours_minutes(day.demonstration_seconds),
        "corrected": hours_minutes(day.corrected_seconds) if day.corrections else "",
        "total": hours_minutes(day.total_seconds),
        "tasks": day.tasks,
        "late": day.late,
        "skipped": day.skipped,
        "demonstrations": day.demonstrations,
        "demonstrations_skipped": day.demonstrations_skipped,
        "corrections": [
            {
                "change": minutes_text(row.seconds),
                "reason": row.reason,
                "by": row.by.get_username() if row.by else "—",
                "at": row.created_at,
            }
            for row in day.corrections
        ],
    }


def _person(person: PersonSheet) -> dict[str, Any]:
    totals = person.totals
    return {
        "username": person.username,
        "days": [_day_row(day) for day in person.days],
        "totals": {
            **{name: int(totals[name]) for name in ("tasks", "late", "skipped")},
            **{name: int(totals[name]) for name in ("demonstrations", "demonstrations_skipped")},
            "task_time": hours_minutes(totals["task_seconds"]),
            "demonstration_time": hours_minutes(totals["demonstration_seconds"]),
            "corrected": hours_minutes(totals["corrected_seconds"]),
            "total": hours_minutes(totals["total_seconds"]),
        },
    }


def _page(
    request: HttpRequest,
    period: Period,
    *,
    error: str = "",
    form: CorrectionForm | None = None,
    status: int = 200,
) -> HttpResponse:
    people = [] if error else sheet(period)
    context = {
        "period": period,
        "error": error,
        "people": [_person(person) for person in people],
        "form": form or CorrectionForm(initial={"day": timezone.localdate()}),
        "this_week": week_of(timezone.localdate()),
        "time_zone": settings.TIME_ZONE,
        "max_days": MAX_DAYS,
    }
    return render(request, "console/timesheets.html", context, status=status)


@require_GET
@role_required(Role.RESEARCHER)
def timesheets_page(request: HttpRequest) -> HttpResponse:
    today = timezone.localdate()
    try:
        period = period_from(request.GET, today)
    except PeriodError as exc:
        return _page(request, week_of(today), error=f"{exc.message} Showing nothing.", status=400)
    return _page(request, period)


@require_GET
@role_required(Role.RESEARCHER)
def timesheets_csv(request: HttpRequest) -> HttpResponse:
    try:
        period = period_from(request.GET, timezone.localdate())
    except PeriodError as exc:
        return HttpResponseBadRequest(exc.message, content_type="text/plain; charset=utf-8")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"timesheet-{period.start.isoformat()}-{period.end.isoformat()}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    write_csv(response, sheet(period))
    return response


@require_POST
@role_required(Role.RESEARCHER)
def correct_time(request: HttpRequest) -> HttpResponse:
    """A correction from the page's form: on success back to the week of the corrected day, showing it;
    refused, the page again with the form as sent and what is wrong (a 400, nothing written; a 403 for a
    person the researcher may not act on, their own hours for one)."""
    form = CorrectionForm(request.POST)
    status = 400
    if form.is_valid():
        data = form.cleaned_data
        try:
            correction = correct(request.user, data["user"], data["day"], data["minutes"], data["reason"])
        except CorrectionError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except NotYourCall as refused:
            form.add_error("user", str(refused))
            status = 403
        else:
            messages.success(
                request,
                f"{correction.user.get_username()} on {correction.day}: {minutes_text(correction.seconds)} "
                "recorded. A correction is never deleted: to undo it, add the opposite one.",
            )
            period = week_of(correction.day)
            return redirect(f"{reverse('console:timesheets')}?{period.query}")
    day = getattr(form, "cleaned_data", {}).get("day")
    shown = day if day and FIRST_DAY <= day <= timezone.localdate() else timezone.localdate()
    return _page(request, week_of(shown), form=form, status=status)
