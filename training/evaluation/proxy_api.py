"""Reward-model proxy evaluations over the API (researchers): ask for one, watch it, cancel it, read its
curves. A request goes through the one check the console page uses (``proxy_jobs.check_proxy_request``);
refusals come back by field and nothing is created."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from core.inputs import MAX_ID
from training.errors import RunError
from training.evaluation.proxy import DEFAULT_RESAMPLES
from training.evaluation.proxy_jobs import (
    BOUNDS,
    MAX_RUNS,
    ProxyRequest,
    cancel_proxy_evaluation,
    request_proxy_evaluation,
)
from training.job_api import cancel_job, visible_checkpoint
from training.models import ProxyEvaluation, RunStatus, SamplingRun

LISTED = (
    "id", "reward_model", "reward_model_name", "sampling_runs", "settings", "status", "cancel_requested",
    "samples_done", "samples_total", "percent", "error", "created_at", "started_at", "finished_at",
)  # fmt: skip


class ProxyEvaluationSerializer(serializers.ModelSerializer):
    # Text, not an enum: the schema's enum of this name is the training runs' (one component) and the
    # sampling runs' (another); a third set shared by the list and the detail would collide with both.
    status = serializers.CharField(read_only=True, help_text=f"One of {', '.join(RunStatus.values)}")
    percent = serializers.IntegerField(read_only=True)
    sampling_runs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = ProxyEvaluation
        fields = LISTED
        read_only_fields = fields


class ProxyEvaluationDetailSerializer(ProxyEvaluationSerializer):
    """With the curves (``results``), every sample's validation reward (``scores``) and the log."""

    class Meta(ProxyEvaluationSerializer.Meta):
        fields = (*LISTED, "results", "scores", "log")
        read_only_fields = fields


class ProxyEvaluationInput(StrictSerializer):
    reward_model = serializers.IntegerField(
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="The validation reward model (a registered reward model) by id",
    )
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        max_length=64,  # the service says how many it takes; this only bounds the lookup
        help_text=f"1 to {MAX_RUNS} finished sampling runs by id",
    )
    seed = serializers.IntegerField(
        required=False,
        default=0,
        help_text=f"The bootstrap's seed ({BOUNDS['seed'][0]} to {BOUNDS['seed'][1]})",
    )
    resamples = serializers.IntegerField(
        required=False,
        default=DEFAULT_RESAMPLES,
        help_text=f"Bootstrap resamples ({BOUNDS['resamples'][0]} to {BOUNDS['resamples'][1]})",
    )


class ProxyEvaluationList(generics.ListAPIView):
    """Proxy evaluations, newest first; POST asks for one (queued on the training worker) and answers 202."""

    permission_classes = (IsResearcher,)
    serializer_class = ProxyEvaluationSerializer

    def get_queryset(self) -> QuerySet[ProxyEvaluation]:
        return (
            ProxyEvaluation.objects.visible_to(self.request.user)
            .defer("scores", "results", "log")
            .prefetch_related("sampling_runs")
        )

    @extend_schema(request=ProxyEvaluationInput, responses={202: ProxyEvaluationSerializer})
    def post(self, request: Request) -> Response:
        form = ProxyEvaluationInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        model = visible_checkpoint(request, data["reward_model"], "reward_model")  # none: the check says why
        runs = self._runs(request, data["runs"])
        proxy = ProxyRequest(reward_model=model, runs=runs, seed=data["seed"], resamples=data["resamples"])
        try:
            evaluation = request_proxy_evaluation(request.user, proxy)
        except RunError as exc:
            field = exc.field if exc.field in ProxyEvaluationInput().fields else "non_field_errors"
            raise serializers.ValidationError(
                {field: [exc.reason if field == exc.field else str(exc)]}
            ) from None
        return Response(ProxyEvaluationSerializer(evaluation).data, status=status.HTTP_202_ACCEPTED)

    @staticmethod
    def _runs(request: Request, ids: list[int]) -> list[SamplingRun]:
        found = SamplingRun.objects.visible_to(request.user).in_bulk(ids)
        missing = [pk for pk in dict.fromkeys(ids) if pk not in found]
        if missing:
            raise serializers.ValidationError({"runs": [f"no such sampling run: {missing[0]}"]})
        return [found[pk] for pk in dict.fromkeys(ids)]


class ProxyEvaluationDetail(generics.RetrieveAPIView):
    """One evaluation: status, progress (samples scored of total, percent), settings (seed, resamples, the
    warnings about the validation model's split), ``results`` once done (per run: its points, k by k,
    with the mean validation reward, the implied preference over k = 1 and their 95% intervals),
    ``scores`` (sample id -> validation reward), log and error."""

    serializer_class = ProxyEvaluationDetailSerializer

    def get_queryset(self) -> QuerySet[ProxyEvaluation]:
        return ProxyEvaluation.objects.visible_to(self.request.user).prefetch_related("sampling_runs")


class ProxyEvaluationCancel(APIView):
    """Cancel: a queued evaluation at once, a running one after the samples it is scoring."""

    @extend_schema(request=None, responses={202: ProxyEvaluationSerializer})
    def post(self, request: Request, pk: int) -> Response:
        return cancel_job(request, ProxyEvaluation, pk, cancel_proxy_evaluation, ProxyEvaluationSerializer)
