"""Flag review over the API: a batch's flagged judgements (``api-batch-flags``, for whoever may read the
batch: researchers; anyone else gets the 404 of a missing batch) and a decision on one
(``api-assignment-flag-decision``, researchers), checked and recorded by ``feedback.flag_review`` exactly
as the console's page does."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.feedback import flag_review as review
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.models import Assignment, ClaimCheck, FeedbackBatch
from core.permissions import get_visible_or_404

PAGE_SIZE = 50


class FlagListQuery(StrictSerializer):
    show = serializers.ChoiceField(choices=review.SHOWN, required=False, default=review.DEFAULT_SHOWN)
    page = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False, default=1)


class FlagDecisionInput(StrictSerializer):
    """Passed on as sent: ``flag_review.check_decision`` is the rule, and says what is wrong."""

    decision = serializers.CharField(allow_blank=True, trim_whitespace=False)
    note = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")


def judgement_data(task: Assignment) -> dict[str, Any]:
    """A flagged judgement: the answers' ids in the labeler's order (slot A/1 first), the response as
    stored, the flags with their reasons in words, the decisions (oldest first), and the model judges'
    checks of its claims as the page shows them (``claim_checks``: each names its claim by slot and
    number in ``response.answers[slot].claims``, its judge run and judge; ``support`` is empty and
    ``error`` says why when the judge's output was unreadable)."""
    comparison = task.item.batch.template in COMPARISON_TEMPLATES
    return {
        "id": task.pk,
        "batch": task.item.batch_id,
        "question": task.item.question_id,
        "labeler": task.labeler.get_username(),
        "submitted_at": task.submitted_at,
        "active_seconds": round(task.active_seconds, 1),
        "answers_in_order_shown": [
            {"slot": "AB"[index] if comparison and index < 2 else str(index + 1), "answer": answer}
            for index, answer in enumerate(task.order)
        ],
        "response": task.response,
        "flags": task.flags,
        "reasons": review.reason_words(task.flags),
        "flag_decision": task.flag_decision,
        "decisions": [
            {
                "decision": row.decision,
                "note": row.note,
                "reviewer": row.reviewer.get_username() if row.reviewer else None,
                "decided_at": row.decided_at,
            }
            for row in task.flag_reviews.all()
        ],
        "claim_checks": [
            {
                "slot": check.slot,
                "claim": check.claim,
                "run": check.run_id,
                "judge": check.run.judge_name,
                "support": check.support,
                "error": check.error,
            }
            for check in task.claim_checks.all()
        ],
    }


def _judgements(tasks: QuerySet[Assignment]) -> QuerySet[Assignment]:
    """``tasks`` with what ``judgement_data`` reads, in a fixed number of queries (applied to the shown
    queryset itself: ``a & b`` keeps only ``a``'s prefetches)."""
    checks = ClaimCheck.objects.select_related("run").order_by("slot", "claim", "run_id")
    return tasks.select_related("labeler", "item__batch").prefetch_related(
        "flag_reviews__reviewer", Prefetch("claim_checks", queryset=checks)
    )


class BatchFlags(APIView):
    """The batch's flagged judgements (``show``: open = not reviewed, the default; keep; exclude; all),
    oldest submission first, a page at a time, with the counts of each."""

    @extend_schema(
        parameters=[
            OpenApiParameter("show", str, enum=[code for code, _ in review.SHOWN]),
            OpenApiParameter("page", int),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, pk: int) -> Response:
        batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
        query = FlagListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        shown = review.shown(batch, query.validated_data["show"])
        page = Paginator(_judgements(shown), PAGE_SIZE).get_page(query.validated_data["page"])
        return Response(
            {
                "counts": review.flag_counts(batch),
                "show": query.validated_data["show"],
                "page": page.number,
                "pages": page.paginator.num_pages,
                "results": [judgement_data(task) for task in page.object_list],
            }
        )


class AssignmentFlagDecision(APIView):
    """Keep a flagged judgement, or exclude it from exports and results (``decision``: keep or exclude;
    ``note`` optional). It replaces the current decision; every decision is kept."""

    permission_classes = (IsResearcher,)

    @extend_schema(request=FlagDecisionInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        task = get_object_or_404(Assignment.objects.visible_to(request.user), pk=pk)
        body = FlagDecisionInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            review.decide(task.pk, request.user, body.validated_data["decision"], body.validated_data["note"])
        except review.FlagReviewError as exc:
            return Response(
                {exc.field: [f"{exc.message} Nothing was changed."]}, status=status.HTTP_400_BAD_REQUEST
            )
        return Response(judgement_data(_judgements(Assignment.objects).get(pk=task.pk)))
