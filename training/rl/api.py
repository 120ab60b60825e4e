"""An RL run over the API: ``POST /api/training-runs`` with kind ``rl`` (training.runs.api answers it). The
request's models and questions as the one check (``training.rl.inputs.check_rl``) takes them, and its
refusals by field as the other kinds' come back: a setting under ``settings``, a question-set choice under
``questions``, both by name. ``GET /api/training-runs/<id>/episodes``: the run's every episode
(``TrainingRunEpisodes``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.api.strict import StrictSerializer
from annotation.models import DemonstrationBatch
from core.inputs import MAX_ID
from core.permissions import get_visible_or_404
from training.errors import RunError
from training.job_api import visible_checkpoint
from training.models import RLEpisode, TrainingRun
from training.rl.config import RL_SETTABLE
from training.rl.episodes import EPISODE_FIELDS
from training.rl.inputs import RLRequest
from training.sampling.api import QUESTION_FIELDS
from training.sampling.runs import QuestionSet

# The inputs only an RL run takes (a BC or RM run naming one is refused).
RL_ONLY = ("reward_model", "questions", "question_ids", "search", "corpus")
FIELDS = ("base_checkpoint", *RL_ONLY)


def rl_request(request: Request, data: dict[str, Any]) -> RLRequest:
    """The RLRequest of validated input; a model or batch this user cannot see is refused by field."""
    chosen = data.get("questions", {})
    batch = None
    if chosen.get("batch"):
        batch = DemonstrationBatch.objects.filter(pk=chosen["batch"]).first()
        if batch is None:
            raise serializers.ValidationError({"questions": {"batch": ["no such demonstration batch"]}})
    return RLRequest(
        reward_model=visible_checkpoint(request, data.get("reward_model"), "reward_model"),
        base=visible_checkpoint(request, data.get("base_checkpoint"), "base_checkpoint"),
        questions=QuestionSet(
            batch=batch,
            split=chosen.get("split", ""),
            dataset=chosen.get("dataset", ""),
            **({"limit": chosen["limit"]} if "limit" in chosen else {}),
        ),
        ids=tuple(data.get("question_ids") or ()),
        search=data.get("search") or "local",
        corpus=data.get("corpus", ""),
        settings=data.get("settings", {}),
    )


def rl_errors(exc: RunError) -> dict[str, Any]:
    """A refusal under the input it is about."""
    if exc.field in QUESTION_FIELDS:
        return {"questions": {exc.field: [exc.reason]}}
    if exc.field in RL_SETTABLE:
        return {"settings": {exc.field: [exc.reason]}}
    if exc.field in FIELDS or exc.field == "settings":
        return {exc.field: [exc.reason]}
    return {"non_field_errors": [str(exc)]}


class RLEpisodeSerializer(serializers.ModelSerializer):
    class Meta:
        model = RLEpisode
        fields = EPISODE_FIELDS
        read_only_fields = fields


class EpisodeQuery(StrictSerializer):
    step = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="Only this step")
    page = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)


class TrainingRunEpisodes(generics.ListAPIView):
    """An RL run's episodes, every one of every step so far (``step``: one step's), by step and index:
    the question, the quotes its answer was prompted with, the answer, the reward, and its terms of the
    step's objective (group, baseline, scale, advantage, tokens, kl, kl_penalty, entropy), from which the
    step's figures in the run's timeline are recomputed (docs/api.md). Empty for other kinds of run."""

    serializer_class = RLEpisodeSerializer

    @extend_schema(parameters=[OpenApiParameter("step", int, description="Only this step")])
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[RLEpisode]:
        run = get_visible_or_404(TrainingRun.objects, self.request.user, pk=self.kwargs["pk"])
        query = EpisodeQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        episodes = run.episodes.order_by("step", "index")
        if "step" in query.validated_data:
            episodes = episodes.filter(step=query.validated_data["step"])
        return episodes
