"""Judge runs as the console page, the API and the ``judge_batch`` command ask for them: one check of every
input (``check_judge_request``), the row created with its judge, prompt version and settings, the job queued
on the ``sampling`` queue once the row is committed, and cancelling. Nothing here loads torch.

A judge is a registered reward model or an endpoint of ``SAMPLING_ENDPOINTS`` (by name: a request never
carries a URL). Routing's settings (``route``, ``confidence_threshold``, ``audit_share``) are checked and
stored here; routing itself reads them from the run once it has judged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.models import FeedbackBatch
from annotation.models.judging import JudgeKind, JudgeRun
from core.jobs.queueing import enqueue
from core.models import log_action
from training.errors import RunError, bounded_settings
from training.judging.prompts import PROMPT_VERSIONS
from training.judging.reward import REFUSES_RATINGS
from training.models import ModelCheckpoint, RunKind

# Each number's range. Margins are in preference logits (a reward model's score difference): 0.1 is a 52.5%
# preference, 1.0 a 73% one.
BOUNDS: dict[str, tuple[float, float]] = {
    "tie_margin": (0.0, 10.0),
    "much_margin": (0.0, 20.0),
    "temperature": (0.0, 2.0),
    "max_tokens": (16, 4000),
    "seed": (0, 2**31 - 1),
    "limit": (1, 10_000),
    "confidence_threshold": (0.0, 1.0),
    "audit_share": (0.0, 1.0),
}
WHOLE = frozenset({"max_tokens", "seed", "limit"})
FLAGS = ("route", "check_claims")
DEFAULTS: dict[str, Any] = {
    "tie_margin": 0.05,
    "much_margin": 1.0,
    "temperature": 0.0,  # a judge is asked for its best verdict, not a sample of its opinions
    "max_tokens": 400,
    "seed": 0,
    "limit": 200,
    "route": False,
    "confidence_threshold": 0.8,
    "audit_share": 0.1,
    "check_claims": False,
}
SETTABLE = frozenset(DEFAULTS)
REWARD_MODEL_SETTINGS = frozenset({"tie_margin", "much_margin"})
ENDPOINT_SETTINGS = frozenset({"temperature", "max_tokens", "check_claims"})


@dataclass(frozen=True)
class JudgeRequest:
    """A judge over a batch: exactly one of ``reward_model`` and ``endpoint``."""

    batch: FeedbackBatch
    reward_model: ModelCheckpoint | None = None
    endpoint: str = ""
    settings: dict[str, Any] = field(default_factory=dict)


def check_settings(given: Any) -> dict[str, Any]:
    """Every setting with its default filled in, or RunError naming the setting at fault."""
    values = bounded_settings(given, DEFAULTS, BOUNDS, WHOLE)
    for name in FLAGS:
        if not isinstance(values[name], bool):
            raise RunError("expected true or false", name)
    if values["much_margin"] < values["tie_margin"]:
        raise RunError("must be at least the tie margin", "much_margin")
    return values


def check_judge_request(request: JudgeRequest) -> dict[str, Any]:
    """The run's full settings, or RunError naming the input a refusal is about."""
    values = check_settings(request.settings)
    batch = request.batch
    if batch.template not in PROMPT_VERSIONS:  # a step review: a process reward model scores steps
        raise RunError(
            "model judges judge answers; a step review's episodes are scored by a process reward model",
            "batch",
        )
    if (request.reward_model is None) == (not request.endpoint):
        raise RunError("choose one judge: a registered reward model or an endpoint", "judge")
    given = set(request.settings) if isinstance(request.settings, dict) else set()
    if request.reward_model is not None:
        if request.reward_model.kind != RunKind.RM:
            raise RunError("the judge must be a registered reward model", "reward_model")
        if batch.template == "rating":
            raise RunError(REFUSES_RATINGS, "reward_model")
        if values["check_claims"]:
            raise RunError("a reward model cannot check claims: choose an endpoint's model", "check_claims")
        if wrong := sorted(given & (ENDPOINT_SETTINGS - {"check_claims"})):
            raise RunError("only for a language model's judging", wrong[0])
    else:
        endpoint = settings.SAMPLING_ENDPOINTS.get(request.endpoint)
        if endpoint is None:
            names = ", ".join(settings.SAMPLING_ENDPOINTS) or "none configured"
            raise RunError(f"unknown endpoint; expected one of: {names}", "endpoint")
        if endpoint.policy != "prompted":
            raise RunError(
                "a judge is prompted with instructions: choose an endpoint serving an instruct model "
                "(policy prompted), not a behaviour-cloned one",
                "endpoint",
            )
        if wrong := sorted(given & REWARD_MODEL_SETTINGS):
            raise RunError("only for a reward model's judging", wrong[0])
    if values["check_claims"] and batch.template != "webgpt_comparison":
        raise RunError("claims are annotated only in WebGPT comparisons", "check_claims")
    if not batch.items.exists():
        raise RunError("the batch has no items to judge", "batch")
    return values


def judge_name(request: JudgeRequest) -> str:
    if request.reward_model is not None:
        return request.reward_model.name
    return f"{request.endpoint}:{settings.SAMPLING_ENDPOINTS[request.endpoint].model}"


def request_judge_run(user: Any, request: JudgeRequest, *, queue: bool = True) -> JudgeRun:
    """Check, create the row and queue the job once committed. Raises RunError with the reason."""
    values = check_judge_request(request)
    by_model = request.reward_model is not None
    kept = {
        name: value
        for name, value in values.items()
        if name != "route" and name not in (ENDPOINT_SETTINGS if by_model else REWARD_MODEL_SETTINGS)
    }
    with transaction.atomic():
        run = JudgeRun.objects.create(
            owner=user if getattr(user, "is_authenticated", False) else None,
            batch=request.batch,
            judge_kind=JudgeKind.REWARD_MODEL if by_model else JudgeKind.ENDPOINT,
            reward_model=request.reward_model,
            endpoint=request.endpoint,
            judge_name=judge_name(request),
            prompt_version="" if by_model else PROMPT_VERSIONS[request.batch.template],
            settings=kept,
            route=values["route"],
            items_total=min(values["limit"], request.batch.items.count()),
        )
        log_action(user, "judge_run.request", run, batch=request.batch.pk, judge=run.judge_name)
        if queue:
            enqueue(run)
    return run


def cancel_judge_run(user: Any, run: JudgeRun) -> None:
    """A queued run is cancelled at once; a running one after the items it is judging (every item judged
    so far is kept)."""
    run.request_cancel()
    log_action(user, "judge_run.cancel", run)
