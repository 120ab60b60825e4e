"""An RL run over the API: ``POST /api/training-runs`` with kind ``rl`` (training.runs.api answers it). The
request's models and questions as the one check (``training.rl.inputs.check_rl``) takes them, and its
refusals by field as the other kinds' come back: a setting under ``settings``, a question-set choice under
``questions``, both by name."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from annotation.models import DemonstrationBatch
from training.errors import RunError
from training.job_api import visible_checkpoint
from training.rl.config import RL_SETTABLE
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
