"""The team over the API (researchers): everyone's roles, state per kind of work, screening results, gold
accuracy with its count and 95% interval, hours this week and last activity (``api-team``); and a change of
one person's state for one kind of work, with the reason (``api-team-state``), checked and recorded by
``workforce.states.set_state`` exactly as the team page does; and the withdrawal of a pending invitation
(``api-team-invitation``). Both changes follow ``workforce.authority``: on one's own account, another
researcher's or an administrator's, a 403 whose ``detail`` says why."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.models import Qualification
from annotation.workforce import invitations
from annotation.workforce import team as people
from annotation.workforce.authority import check_may_act_on
from annotation.workforce.screening import Candidate
from annotation.workforce.states import ACTION_STATES, State, StateError, set_state
from annotation.workforce.team_forms import MAX_REASON
from annotation.workforce.timesheets import this_week
from core.permissions import get_visible_or_404

User = get_user_model()


def screening_data(candidate: Candidate) -> dict[str, Any]:
    """A screening result as the candidates page shows it: the suggestion, items done, each score."""
    return {
        "suggestion": candidate.suggestion,
        "done": candidate.done,
        "total": candidate.total,
        "scores": [
            {
                "measure": score.measure,
                "value": score.value,
                "count": score.count,
                "low": score.low,
                "high": score.high,
                "cutoff": score.cutoff,
            }
            for score in candidate.scores
        ],
    }


def member_data(member: people.Member) -> dict[str, Any]:
    gold = member.gold
    return {
        "id": member.user.pk,
        "username": member.user.get_username(),
        "active": member.user.is_active,
        "roles": [role.value for role in member.roles],
        "states": {state.kind: state.state for state in member.states},
        "screening": {
            state.kind: screening_data(state.screening) for state in member.states if state.screening
        },
        "gold": {"accuracy": gold.accuracy, "count": gold.count, "low": gold.low, "high": gold.high},
        "agreement": {
            "value": member.agreement.accuracy,
            "count": member.agreement.count,
            "low": member.agreement.low,
            "high": member.agreement.high,
        },
        "seconds_this_week": round(member.week_seconds, 1),
        "hours_this_week": round(member.week_hours, 2),
        "last_activity": member.last_activity,
    }


class TeamList(APIView):
    """Everyone with an account: ``people`` (a labeler or demonstrator role), ``researchers`` and
    ``without_role``. A kind of work without a state is "applicant"; ``screening`` has, per kind of work
    whose screening test they took, the candidates page's suggestion and scores against the cutoffs; gold
    accuracy is over every gold item the person judged in production batches (``accuracy`` null when none),
    its interval Wilson's."""

    permission_classes = (IsResearcher,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        team = people.team()
        return Response(
            {
                "week_starts": this_week()[0],
                "people": [member_data(member) for member in team.workers],
                "researchers": [member_data(member) for member in team.researchers],
                "without_role": [member_data(member) for member in team.without_role],
            }
        )


class StateInput(StrictSerializer):
    kind = serializers.ChoiceField(choices=[])
    action = serializers.ChoiceField(choices=list(ACTION_STATES))
    reason = serializers.CharField(max_length=MAX_REASON, allow_blank=True)
    exclude_work = serializers.BooleanField(required=False, default=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = people.all_kinds()

    def validate_reason(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Say why: the reason is kept in the audit trail.")
        return value

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("exclude_work") and ACTION_STATES[data["action"]] != State.REVOKED:
            raise serializers.ValidationError(
                {"exclude_work": ["Work is excluded from exports only with a revocation."]}
            )
        return data


def qualification_data(row: Qualification) -> dict[str, Any]:
    return {
        "user": row.user_id,
        "kind": row.kind,
        "state": row.state,
        "reason": row.reason,
        "decided_by": row.decided_by.get_username() if row.decided_by else None,
        "decided_at": row.decided_at,
        "work_excluded_before": row.work_excluded_before,
    }


class TeamState(APIView):
    """Change one person's state for one kind of work: ``action`` qualify, pause, reinstate (to qualified),
    revoke or reset (a revoked person back to applicant), with a ``reason``; ``exclude_work`` (revoke only)
    leaves their work of that kind submitted until now out of exports. A change the current state does not
    allow is a 400 under ``action``; a person the caller may not act on (``workforce.authority``: themselves,
    another researcher, an administrator) a 403 naming why. Either way nothing is changed."""

    permission_classes = (IsResearcher,)

    @extend_schema(request=StateInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        person = get_object_or_404(User, pk=pk)
        check_may_act_on(request.user, person)
        body = StateInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            row = set_state(
                person,
                data["kind"],
                ACTION_STATES[data["action"]],
                by=request.user,
                reason=data["reason"],
                exclude_work=data["exclude_work"],
                action=data["action"],
            )
        except StateError as error:
            return Response({"action": [f"{error} Nothing was changed."]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(qualification_data(row))


class InvitationDetail(APIView):
    """A pending invitation (an open one, or the link of an account made on the team page): ``DELETE``
    withdraws it, so its link stops working (204), with an audit entry. One used, expired or withdrawn is a
    404, and so is any invitation to anyone but a researcher (the research team's: it does not exist); one
    the caller may not act on (``workforce.authority``) a 403 naming why."""

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        invitation = get_visible_or_404(invitations.valid(), request.user, pk=pk)
        try:
            invitations.withdraw(request.user, invitation.pk)
        except invitations.InvitationError:  # used or withdrawn since it was read
            raise NotFound from None
        return Response(status=status.HTTP_204_NO_CONTENT)
