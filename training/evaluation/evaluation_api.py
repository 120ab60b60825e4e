"""Benchmark runs and experiment reports over the API (researchers). A benchmark request is a sampling
run's inputs (without the question set: the benchmark's eval split) plus the benchmark and, for TruthfulQA,
who judges; it goes through the one check the console page uses (``benchmark_runs.request_benchmark``). A
report is made from policies as ``GET /api/experiment-policies`` lists them; its detail is the report
itself (the page's numbers, JSON). Refusals come back by field and nothing is created."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from core.inputs import MAX_ID
from core.permissions import get_visible_or_404
from training.errors import RunError
from training.evaluation.benchmark_runs import (
    DEFAULT_LIMIT,
    BenchmarkRequest,
    cancel_benchmark,
    request_benchmark,
)
from training.evaluation.benchmark_scores import results_of
from training.evaluation.experiment_service import MAX_POLICIES, create_experiment
from training.evaluation.experiments import available_policies, experiment_report
from training.job_api import cancel_job, visible_checkpoint
from training.models import Benchmark, BenchmarkRun, Experiment, RunStatus
from training.sampling.api import SamplingRunInput, refusal_by_field
from training.sampling.runs import SamplingRequest

LISTED = (
    "id", "benchmark", "sampling_run", "batch", "judge_run", "judge", "status", "cancel_requested",
    "stages_done", "stages_total", "percent", "error", "created_at", "started_at", "finished_at",
)  # fmt: skip


class BenchmarkRunSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True, help_text=f"One of {', '.join(RunStatus.values)}")
    percent = serializers.IntegerField(read_only=True)
    benchmark = serializers.CharField(read_only=True, help_text=f"One of {', '.join(Benchmark.values)}")

    class Meta:
        model = BenchmarkRun
        fields = LISTED
        read_only_fields = fields


class BenchmarkRunDetailSerializer(BenchmarkRunSerializer):
    """With ``results`` (the scores, TruthfulQA's people's rates as they stand) and the log."""

    results = serializers.SerializerMethodField()

    class Meta(BenchmarkRunSerializer.Meta):
        fields = (*LISTED, "results", "log")
        read_only_fields = fields

    def get_results(self, run: BenchmarkRun) -> dict[str, Any]:
        return results_of(run)


class BenchmarkRunInput(SamplingRunInput):
    benchmark = serializers.CharField(max_length=20, help_text=f"One of {', '.join(Benchmark.values)}")
    limit = serializers.IntegerField(
        required=False, default=DEFAULT_LIMIT, help_text="The first this many eval questions by id"
    )
    judge_endpoint = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=100,
        help_text="TruthfulQA: an endpoint of SAMPLING_ENDPOINTS whose model rates the answers",
    )  # fmt: skip
    judge_reward_model = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_ID,
        help_text="TruthfulQA: a registered reward model (trained on its reference judgements) by id",
    )  # fmt: skip
    judge_settings = serializers.DictField(
        required=False, default=dict, help_text="TruthfulQA's judge: temperature, max_tokens, seed"
    )
    people = serializers.BooleanField(
        required=False, default=False, help_text="TruthfulQA: open the answers' rating batch to labelers"
    )

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        for name in ("questions", "step_model"):  # the eval split; no guided samples in a benchmark
            fields.pop(name)
        return fields


class BenchmarkRunList(generics.ListAPIView):
    """Benchmark runs, newest first; POST asks for one (queued on the sampling worker) and answers 202."""

    permission_classes = (IsResearcher,)
    serializer_class = BenchmarkRunSerializer

    def get_queryset(self) -> QuerySet[BenchmarkRun]:
        return BenchmarkRun.objects.visible_to(self.request.user).defer("log", "results")

    @extend_schema(request=BenchmarkRunInput, responses={202: BenchmarkRunSerializer})
    def post(self, request: Request) -> Response:
        form = BenchmarkRunInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        sampling = SamplingRequest(
            policy=visible_checkpoint(request, data.get("policy"), "policy"),
            reward_model=visible_checkpoint(request, data.get("reward_model"), "reward_model"),
            backend=data["backend"],
            search=data["search"],
            corpus=data["corpus"],
            settings=data["settings"],
        )
        wanted = BenchmarkRequest(
            benchmark=data["benchmark"],
            sampling=sampling,
            limit=data["limit"],
            judge_endpoint=data["judge_endpoint"],
            judge_reward_model=visible_checkpoint(
                request, data.get("judge_reward_model"), "judge_reward_model"
            ),
            judge_settings=data["judge_settings"],
            people=data["people"],
        )
        try:
            run = request_benchmark(request.user, wanted)
        except RunError as exc:
            fields = BenchmarkRunInput().fields
            raise serializers.ValidationError(
                {exc.field: [exc.reason]} if exc.field in fields else refusal_by_field(exc)
            ) from None
        return Response(BenchmarkRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class BenchmarkRunDetail(generics.RetrieveAPIView):
    """One run: status, stage (answering, scoring), its sampling run, rating batch and judge run, and once
    done ``results``: TriviaQA's exact match, F1 and alias containment over the answered questions (value,
    95% interval, counts) with every question's row; TruthfulQA's rates by the judge and by people, with
    the judge's agreement with the labelers."""

    serializer_class = BenchmarkRunDetailSerializer

    def get_queryset(self) -> QuerySet[BenchmarkRun]:
        return BenchmarkRun.objects.visible_to(self.request.user).select_related(
            "sampling_run", "batch", "judge_run"
        )


class BenchmarkRunCancel(APIView):
    """Cancel the run with its sampling run and judge run."""

    @extend_schema(request=None, responses={202: BenchmarkRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        return cancel_job(request, BenchmarkRun, pk, cancel_benchmark, BenchmarkRunSerializer)


class PolicySerializer(serializers.Serializer):
    policy_name = serializers.CharField(max_length=200)
    n = serializers.IntegerField(min_value=1, max_value=64)
    reward_model_name = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
    label = serializers.CharField(read_only=True)


class PolicyList(APIView):
    """The policies a report can compare: each a model sampled best-of-n against a reward model, as some
    finished sampling run names it."""

    permission_classes = (IsResearcher,)

    @extend_schema(responses={200: PolicySerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response([key.stored() | {"label": key.label} for key in available_policies()])


class ExperimentSerializer(serializers.ModelSerializer):
    class Meta:
        model = Experiment
        fields = ("id", "name", "notes", "policies", "created_at")
        read_only_fields = fields


class ExperimentInput(StrictSerializer):
    name = serializers.CharField(max_length=200)
    notes = serializers.CharField(required=False, default="", allow_blank=True, max_length=10_000)
    policies = serializers.ListField(child=PolicySerializer(), max_length=MAX_POLICIES)


class ExperimentList(generics.ListAPIView):
    """Experiment reports, newest first; POST makes one (201)."""

    permission_classes = (IsResearcher,)
    serializer_class = ExperimentSerializer

    def get_queryset(self) -> QuerySet[Experiment]:
        return Experiment.objects.visible_to(self.request.user)

    @extend_schema(request=ExperimentInput, responses={201: ExperimentSerializer})
    def post(self, request: Request) -> Response:
        form = ExperimentInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            experiment = create_experiment(request.user, data["name"], data["policies"], data["notes"])
        except RunError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": [exc.reason]}) from None
        return Response(ExperimentSerializer(experiment).data, status=status.HTTP_201_CREATED)


class ExperimentDetail(APIView):
    """The report: each policy with its sampling runs, figures (label, value, 95% interval, questions, the
    page it came from) and cost, read from the data as it stands."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        experiment = get_visible_or_404(Experiment.objects, request.user, pk=pk)
        return Response(experiment_report(experiment))
