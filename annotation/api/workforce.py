"""The workforce over the API, for researchers: each kind of work's screening candidates with their scores
against the cutoffs (``GET /api/workforce/candidates/<kind>``) and who is paused, with why."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.models import Qualification
from annotation.workforce.screening import candidates_for
from annotation.workforce.states import State, all_kinds, kind_label


class WorkforceCandidates(APIView):
    """Everyone who took the kind's screening test: items done of those with a reference, each score (value,
    count, 95% interval, cutoff, whether it reaches it; on each item's first submission), ``revised`` (items
    changed after it) and the suggestion (pass, fail, incomplete). 404 for a kind of work that does not
    exist."""

    permission_classes = (IsResearcher,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, kind: str) -> Response:
        if kind not in all_kinds():
            return Response({"detail": "No such kind of work."}, status=404)
        rows = [
            {
                "user": candidate.user_id,
                "username": candidate.username,
                "state": candidate.state,
                "done": candidate.done,
                "total": candidate.total,
                "revised": candidate.revised,
                "suggestion": candidate.suggestion,
                "scores": [{**asdict(score), "passes": score.passes} for score in candidate.scores],
            }
            for candidate in candidates_for(kind)
        ]
        return Response({"kind": kind, "label": kind_label(kind), "candidates": rows})


class WorkforcePaused(APIView):
    """Everyone paused, per kind of work, with when, by whom (null: automatically) and why."""

    permission_classes = (IsResearcher,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        paused = Qualification.objects.filter(state=State.PAUSED).select_related("user", "decided_by")
        return Response(
            {
                "paused": [
                    {
                        "user": row.user_id,
                        "username": row.user.get_username(),
                        "kind": row.kind,
                        "since": row.decided_at,
                        "by": row.decided_by.get_username() if row.decided_by else None,
                        "reason": row.reason,
                    }
                    for row in paused.order_by("-decided_at", "id")
                ]
            }
        )
