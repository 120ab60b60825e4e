"""Sampling runs over the API (researchers): ask for best-of-n answers from a policy, watch the run, cancel
it, read its samples; list the backends a run may name. A request goes through the one check of every
input (``sampling_runs.request_sampling``) that the pages and the ``sample_answers`` command use;
refusals come back by field. Backends are chosen by name: no request carries a URL, and the endpoints'
key variables are never shown."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.models import DemonstrationBatch
from core.inputs import MAX_ID
from core.permissions import get_visible_or_404
from training.errors import RunError
from training.job_api import cancel_job, visible_checkpoint
from training.models import RunStatus, Sample, SamplingRun
from training.sampling.runs import (
    BOUNDS,
    PROMPTED_DEFAULT,
    SETTABLE,
    QuestionSet,
    SamplingRequest,
    cancel_sampling,
    request_sampling,
)

QUESTION_FIELDS = ("batch", "split", "dataset", "limit")


@extend_schema_field({"type": "string", "enum": list(RunStatus.values)})
class StatusField(serializers.CharField):
    """A run's status, its values inline in the schema: a component for them would collide with the
    training runs' (the same choices under the same field name)."""


class SamplingRunSerializer(serializers.ModelSerializer):
    status = StatusField(read_only=True)
    percent = serializers.IntegerField(read_only=True)
    question_count = serializers.SerializerMethodField()

    class Meta:
        model = SamplingRun
        fields = (
            "id", "policy", "policy_name", "reward_model", "reward_model_name", "step_model",
            "step_model_name", "backend", "search", "corpus",
            "n", "settings",
            "question_source", "question_count", "status", "cancel_requested", "episodes_done",
            "episodes_total", "actions_done", "actions_limit", "percent", "estimated_end_at",
            "tokens_generated", "tokens_per_second", "metrics", "log", "error",
            "created_at", "started_at", "finished_at",
        )  # fmt: skip
        read_only_fields = fields

    def get_question_count(self, run: SamplingRun) -> int:
        return len(run.question_ids)


class SampleSerializer(serializers.ModelSerializer):
    question_text = serializers.CharField(source="question.text", read_only=True)
    answer = serializers.CharField(source="episode.answer", read_only=True)
    quotes = serializers.SerializerMethodField()

    class Meta:
        model = Sample
        fields = (
            "id", "question", "question_text", "index", "episode", "answer", "quotes", "score", "chosen",
            "declined", "actions", "invalid_actions", "tokens", "guided", "step_score",
        )  # fmt: skip
        read_only_fields = fields

    def get_quotes(self, sample: Sample) -> list[dict[str, Any]]:
        return list((sample.episode.state or {}).get("quotes") or [])


class BackendSerializer(serializers.Serializer):
    """``local`` or an operator's endpoint as ``EndpointConfig.public()`` shows it."""

    name = serializers.CharField()
    kind = serializers.CharField(help_text="local, or endpoint (an OpenAI-compatible server)")
    model = serializers.CharField(help_text="The model it serves; local: the chosen BC model or the default")
    base_url = serializers.CharField(required=False)
    policy = serializers.CharField(required=False, help_text="prompted or bc (how the model is prompted)")
    timeout_s = serializers.FloatField(required=False)
    max_parallel = serializers.IntegerField(required=False)
    max_retries = serializers.IntegerField(required=False)
    server = serializers.CharField(
        required=False, help_text="openai, vllm, llamacpp, tgi or transformers (which fields it takes)"
    )


class QuestionSetInput(StrictSerializer):
    batch = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_ID, help_text="A demonstration batch"
    )
    split = serializers.CharField(required=False, allow_blank=True, max_length=20)
    dataset = serializers.CharField(required=False, allow_blank=True, max_length=100)
    limit = serializers.IntegerField(
        required=False,
        help_text=f"The first this many matching questions by id ({BOUNDS['limit'][0]:g} to "
        f"{BOUNDS['limit'][1]:g})",
    )


class SamplingRunInput(StrictSerializer):
    policy = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text=f"A registered BC or RL model by id; null: {PROMPTED_DEFAULT}",
    )
    reward_model = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="A registered reward model by id, to score the samples; null: unscored",
    )
    step_model = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="A registered process reward model by id: each question is also sampled n times guided "
        "by it (settings.guide_k commands a step, its best taken) beside the unguided samples; null: "
        "unguided",
    )
    backend = serializers.CharField(
        required=False,
        default="local",
        max_length=100,
        help_text="local, or an endpoint's name (GET /api/sampling-endpoints); never a URL",
    )
    search = serializers.CharField(
        required=False,
        default="local",
        max_length=20,
        help_text="The search provider its episodes browse with: local (a corpus), searxng or brave "
        "(live web, where the operator configured them)",
    )
    corpus = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=100,
        help_text="For the local provider: the corpus searched; empty: the default",
    )
    questions = QuestionSetInput(
        required=False, help_text="Which questions (all given must hold): batch, split, dataset; and limit"
    )
    settings = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"Sampling settings ({', '.join(sorted(SETTABLE - {'limit'}))}), each within its range",
    )


class SamplingRunList(generics.ListAPIView):
    """Sampling runs, newest first; POST asks for one (queued on the sampling worker) and answers 202."""

    permission_classes = (IsResearcher,)
    serializer_class = SamplingRunSerializer

    def get_queryset(self) -> QuerySet[SamplingRun]:
        return SamplingRun.objects.visible_to(self.request.user)

    @extend_schema(request=SamplingRunInput, responses={202: SamplingRunSerializer})
    def post(self, request: Request) -> Response:
        form = SamplingRunInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        chosen = data.get("questions", {})
        if "limit" in data["settings"]:  # the question set's, not a sampling setting
            raise serializers.ValidationError({"settings": {"limit": ["give the limit under questions"]}})
        batch = None
        if chosen.get("batch"):
            batch = DemonstrationBatch.objects.filter(pk=chosen["batch"]).first()
            if batch is None:
                raise serializers.ValidationError({"questions": {"batch": ["no such demonstration batch"]}})
        sampling = SamplingRequest(
            policy=visible_checkpoint(request, data.get("policy"), "policy"),
            reward_model=visible_checkpoint(request, data.get("reward_model"), "reward_model"),
            step_model=visible_checkpoint(request, data.get("step_model"), "step_model"),
            backend=data["backend"],
            search=data["search"],
            corpus=data["corpus"],
            questions=QuestionSet(
                batch=batch,
                split=chosen.get("split", ""),
                dataset=chosen.get("dataset", ""),
                **({"limit": chosen["limit"]} if "limit" in chosen else {}),
            ),
            settings=data["settings"],
        )
        try:
            run = request_sampling(request.user, sampling)
        except RunError as exc:
            raise serializers.ValidationError(refusal_by_field(exc)) from None
        return Response(SamplingRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


def refusal_by_field(exc: RunError) -> dict[str, Any]:
    """A refusal under the input it is about: a question-set choice under ``questions``, a setting under
    ``settings``, both by name."""
    if exc.field in QUESTION_FIELDS:
        return {"questions": {exc.field: [exc.reason]}}
    if exc.field in SETTABLE:
        return {"settings": {exc.field: [exc.reason]}}
    if exc.field in SamplingRunInput().fields:
        return {exc.field: [exc.reason]}
    return {"non_field_errors": [str(exc)]}


class SamplingRunDetail(generics.RetrieveAPIView):
    """One run: status, progress (actions taken of at most how many, which the percent follows; episodes
    finished of total; while it runs, the estimated end), tokens/s, metrics, settings, the question set,
    log and error. Samples are listed as each question's n episodes end."""

    serializer_class = SamplingRunSerializer

    def get_queryset(self) -> QuerySet[SamplingRun]:
        return SamplingRun.objects.visible_to(self.request.user)


class SamplingRunCancel(APIView):
    """Cancel: a queued run at once, a running one after its current round of actions (the questions it
    finished are kept)."""

    @extend_schema(request=None, responses={202: SamplingRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        return cancel_job(request, SamplingRun, pk, cancel_sampling, SamplingRunSerializer)


@extend_schema(
    parameters=[OpenApiParameter("pk", int, OpenApiParameter.PATH, description="The sampling run")]
)
class SampleList(generics.ListAPIView):
    """A run's samples by question and index: the answer with its quotes, the reward model's score,
    whether best-of-n chose it or the question was declined, and the episode (its full trajectory is at
    /api/episodes/<episode>)."""

    serializer_class = SampleSerializer

    def get_queryset(self) -> QuerySet[Sample]:
        run = get_visible_or_404(SamplingRun.objects, self.request.user, pk=self.kwargs["pk"])
        return run.samples.select_related("question", "episode").order_by("question_id", "index")


class BackendList(APIView):
    """What a run's ``backend`` may name: ``local`` (transformers in the worker) and the operator's
    OpenAI-compatible endpoints."""

    permission_classes = (IsResearcher,)

    @extend_schema(responses={200: BackendSerializer(many=True)})
    def get(self, request: Request) -> Response:
        local = {"name": "local", "kind": "local", "model": f"the chosen BC model, or {PROMPTED_DEFAULT}"}
        endpoints = [
            {"kind": "endpoint", **endpoint.public()} for endpoint in settings.SAMPLING_ENDPOINTS.values()
        ]
        return Response(BackendSerializer([local, *endpoints], many=True).data)
