"""Time sheets over the API: ``GET /api/timesheets`` (a week or a range of days: each person's days and
totals; researchers see everyone, a labeler or demonstrator only themselves) and
``POST /api/timesheets/corrections`` (researchers), checked by ``corrections.correct`` exactly as the
console's form is."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, IsWorkerOrResearcher
from annotation.api.strict import StrictSerializer
from annotation.workforce import sheets
from annotation.workforce.corrections import MAX_REASON, CorrectionError, correct
from annotation.workforce.periods import MAX_DAYS, PeriodError, period_from
from annotation.workforce.timesheets import days
from core.permissions import Role, has_role


class CorrectionInput(StrictSerializer):
    """Passed on as sent: ``corrections.correct`` is the rule, and says what is wrong."""

    user = serializers.CharField(max_length=150, help_text="The person's user name")
    day = serializers.DateField(help_text="YYYY-MM-DD, today or earlier")
    minutes = serializers.IntegerField(help_text="Signed: positive adds time; at most 1440 either way")
    reason = serializers.CharField(allow_blank=True, max_length=MAX_REASON)


def _bad(field: str, message: str) -> Response:
    return Response({field: [message]}, status=status.HTTP_400_BAD_REQUEST)


class Timesheets(APIView):
    """Active time per person per day, with the work done and the corrections, and each person's totals
    over the period: ``week`` (any day of it; Monday to Sunday), or ``start`` and ``end`` (both included,
    at most 92 days), by default this week. Seconds are rounded to 0.1. Researchers see everyone (``user``:
    one person); a labeler or demonstrator sees only their own rows (``user`` naming anyone else: 403)."""

    permission_classes = (IsWorkerOrResearcher,)

    @extend_schema(
        parameters=[
            OpenApiParameter("week", OpenApiTypes.DATE, description="Any day of the week wanted"),
            OpenApiParameter("start", OpenApiTypes.DATE, description="First day (with end)"),
            OpenApiParameter(
                "end", OpenApiTypes.DATE, description=f"Last day (with start; {MAX_DAYS} at most)"
            ),
            OpenApiParameter("user", str, description="Only this person (user name)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        try:
            period = period_from(request.query_params, timezone.localdate())
        except PeriodError as exc:
            return _bad(exc.field, exc.message)
        named = request.query_params.get("user", "")
        if has_role(request.user, Role.RESEARCHER):
            users = None
            if named:
                found = get_user_model().objects.filter(username=named).first() if _name_like(named) else None
                if found is None:
                    return _bad("user", f"No one is called '{named[:150]}'.")
                users = [found.pk]
        else:
            if named and named != request.user.get_username():
                raise PermissionDenied("You may see only your own time sheet.")
            users = [request.user.pk]
        people = sheets.sheet(period, users)
        return Response(
            {
                "start": period.start,
                "end": period.end,
                "days": [sheets.day_data(person, day) for person in people for day in person.days],
                "totals": [sheets.totals_data(person) for person in people],
            }
        )


def _name_like(text: str) -> bool:
    """Whether ``text`` could be a user name at all (PostgreSQL refuses NUL in a query)."""
    return len(text) <= 150 and "\x00" not in text


class TimesheetCorrections(APIView):
    """Correct one person's time on one day: ``{"user", "day", "minutes", "reason"}``. Refused (a 400
    naming the field, nothing written) for a person without the labeler or demonstrator role, a day in the
    future, an empty reason, 0 minutes or more than 24 hours either way, or a day that would fall below
    zero or go over 24 hours (corrections included); a 403 naming why for a person the caller may not act
    on (``workforce.authority``: their own hours, another researcher's, an administrator's). A correction
    is never edited or deleted: undo one with the opposite correction."""

    permission_classes = (IsResearcher,)

    @extend_schema(request=CorrectionInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        body = CorrectionInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            correction = correct(request.user, data["user"], data["day"], data["minutes"], data["reason"])
        except CorrectionError as exc:
            return _bad(exc.field, f"{exc.message} Nothing was changed.")
        (day,) = days(correction.day, correction.day, [correction.user_id])
        person = sheets.PersonSheet(correction.user_id, correction.user.get_username(), [day])
        return Response(
            {"correction": sheets.correction_data(correction), "day": sheets.day_data(person, day)},
            status=status.HTTP_201_CREATED,
        )
