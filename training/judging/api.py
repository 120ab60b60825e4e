"""Judge runs over the API (researchers): ask a judge (a registered reward model or an endpoint's model) to
judge a feedback batch, watch the run, cancel it, read its judgements. A request goes through the one check
of every input (``judging.runs.request_judge_run``) that the pages and the ``judge_batch`` command use;
refusals come back by field. Endpoints are chosen by name: no request carries a URL."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.models import FeedbackBatch
from annotation.models.judging import JudgeRun, ModelJudgement
from core.inputs import MAX_ID
from core.permissions import get_visible_or_404
from training.errors import RunError
from training.job_api import cancel_job, visible_checkpoint
from training.judging.runs import SETTABLE, JudgeRequest, cancel_judge_run, request_judge_run


class JudgeRunSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)

    class Meta:
        model = JudgeRun
        fields = (
            "id", "batch", "judge_kind", "reward_model", "endpoint", "judge_name", "prompt_version",
            "settings", "route", "status", "cancel_requested", "items_done", "items_total", "percent",
            "estimated_end_at", "metrics", "log", "error", "created_at", "started_at", "finished_at",
        )  # fmt: skip
        read_only_fields = fields


class ModelJudgementSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelJudgement
        fields = (
            "id", "item", "swapped", "order", "response", "raw_output", "error", "confidence", "details",
            "created_at",
        )  # fmt: skip
        read_only_fields = fields


class JudgeRunInput(StrictSerializer):
    batch = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="The feedback batch judged")
    reward_model = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="The judge when it is a registered reward model (by id); else give endpoint",
    )
    endpoint = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=100,
        help_text="The judge when it is a language model: an endpoint's name (GET /api/sampling-endpoints)",
    )
    settings = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"Judging settings ({', '.join(sorted(SETTABLE))}), each within its range (docs/judges.md)",
    )


class JudgeRunList(generics.ListAPIView):
    """Judge runs, newest first; POST asks for one (queued on the sampling worker) and answers 202."""

    permission_classes = (IsResearcher,)
    serializer_class = JudgeRunSerializer

    def get_queryset(self) -> QuerySet[JudgeRun]:
        runs = JudgeRun.objects.visible_to(self.request.user)
        batch = self.request.query_params.get("batch", "")
        return runs.filter(batch_id=int(batch)) if batch.isdecimal() and int(batch) <= MAX_ID else runs

    @extend_schema(
        request=JudgeRunInput,
        responses={202: JudgeRunSerializer},
        parameters=[OpenApiParameter("batch", int, description="Only this batch's runs (GET)")],
    )
    def post(self, request: Request) -> Response:
        form = JudgeRunInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        batch = FeedbackBatch.objects.visible_to(request.user).filter(pk=data["batch"]).first()
        if batch is None:
            raise serializers.ValidationError({"batch": ["no such feedback batch"]})
        judge = JudgeRequest(
            batch=batch,
            reward_model=visible_checkpoint(request, data.get("reward_model"), "reward_model"),
            endpoint=data["endpoint"],
            settings=data["settings"],
        )
        try:
            run = request_judge_run(request.user, judge)
        except RunError as exc:
            raise serializers.ValidationError(_by_field(exc)) from None
        return Response(JudgeRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


def _by_field(exc: RunError) -> dict[str, Any]:
    """A refusal under the input it is about: a setting under ``settings`` by name."""
    if exc.field in SETTABLE:
        return {"settings": {exc.field: [exc.reason]}}
    if exc.field in JudgeRunInput().fields:
        return {exc.field: [exc.reason]}
    return {"non_field_errors": [exc.reason if exc.field == "judge" else str(exc)]}


class JudgeRunDetail(generics.RetrieveAPIView):
    """One run: its judge, prompt version and settings, status, progress (items judged in both orders of
    the total; while it runs, the estimated end), the counts, log and error."""

    serializer_class = JudgeRunSerializer

    def get_queryset(self) -> QuerySet[JudgeRun]:
        return JudgeRun.objects.visible_to(self.request.user)


class JudgeRunCancel(APIView):
    """Cancel: a queued run at once, a running one after the items it is judging (those judged are kept)."""

    @extend_schema(request=None, responses={202: JudgeRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        return cancel_job(request, JudgeRun, pk, cancel_judge_run, JudgeRunSerializer)


@extend_schema(parameters=[OpenApiParameter("pk", int, OpenApiParameter.PATH, description="The judge run")])
class ModelJudgementList(generics.ListAPIView):
    """A run's judgements by item, the drawn order first then the reverse: the answer ids in the order
    shown, the response in the labelers' shape (null when the output could not be read: ``error`` says
    why), the raw output, the confidence and details (scores, seed, tokens, the constraint used)."""

    serializer_class = ModelJudgementSerializer

    def get_queryset(self) -> QuerySet[ModelJudgement]:
        run = get_visible_or_404(JudgeRun.objects, self.request.user, pk=self.kwargs["pk"])
        return run.judgements.order_by("item_id", "swapped")
