"""Sampling runs as the web app, the API and the ``sample_answers`` command ask for them: one check of
every input (``check_sampling``), the questions resolved into the row, the job queued on the ``sampling``
queue once the row is committed, and cancelling. Nothing here loads torch.

Splits are honoured by what each split is for: sampling answers to ``eval`` questions is allowed (that is
how a policy is evaluated); training on them stays refused by the training jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count

from annotation.models import DemonstrationBatch, Episode, EpisodeStatus, Question, Split
from browser.sources import LOCAL, check_source
from core.jobs.queueing import enqueue
from core.models import log_action
from training.errors import RunError, bounded_settings
from training.models import POLICY_KINDS, ModelCheckpoint, RunKind, SamplingRun
from training.runs.config import SMOLLM2
from training.sampling.states import state_indexes

# Each number's range: (low, high). The paper's best-of-n goes to 64; 100 actions is its action limit.
BOUNDS: dict[str, tuple[float, float]] = {
    "n": (1, 64),
    "temperature": (0.0, 2.0),
    "max_actions": (1, 100),
    "max_answer_tokens": (1, 1000),
    "max_command_tokens": (1, 200),
    "seed": (0, 2**31 - 1),
    "limit": (1, 10_000),
    "examples": (0, 8),
    "guide_k": (2, 16),
}
DEFAULTS: dict[str, Any] = {
    "n": 4,
    "temperature": 0.8,
    "max_actions": 100,
    "max_answer_tokens": 200,
    "max_command_tokens": 48,
    "seed": 0,
    "limit": 20,
    "examples": 3,
    "constrain_commands": None,
    "decline_threshold": None,
    # With a step model: commands sampled at each step of a guided episode, the PRM's best taken.
    "guide_k": 4,
    # Instead of browsing: the policy's next action at states of the questions' demonstrations (states.py).
    "at_states": False,
}
SETTABLE = frozenset(DEFAULTS)
PROMPTED_DEFAULT = f"{SMOLLM2} (prompted)"


@dataclass(frozen=True)
class QuestionSet:
    """Which questions: those of a demonstration batch, a split, a dataset (any combination, all must
    hold), the first ``limit`` of them by id."""

    batch: DemonstrationBatch | None = None
    split: str = ""
    dataset: str = ""
    limit: int = DEFAULTS["limit"]

    def describe(self) -> dict[str, Any]:
        return {
            "batch": self.batch.pk if self.batch else None,
            "split": self.split,
            "dataset": self.dataset,
            "limit": self.limit,
        }


@dataclass(frozen=True)
class SamplingRequest:
    policy: ModelCheckpoint | None = None
    reward_model: ModelCheckpoint | None = None
    step_model: ModelCheckpoint | None = None  # a process reward model: guided samples beside unguided
    backend: str = "local"
    search: str = LOCAL  # the search provider its episodes browse with (browser.sources)
    corpus: str = ""  # for the local provider; blank: DEFAULT_CORPUS
    questions: QuestionSet = field(default_factory=QuestionSet)
    settings: dict[str, Any] = field(default_factory=dict)


def check_sampling(request: SamplingRequest) -> tuple[dict[str, Any], list[int]]:
    """The run's full settings and its question ids, or RunError naming the input it is about."""
    values = check_settings(request.settings)
    if request.policy is not None and request.policy.kind not in POLICY_KINDS:
        raise RunError(
            "the policy must be a BC or RL model (or empty: the prompted SmolLM2 default)", "policy"
        )
    if request.reward_model is not None and request.reward_model.kind != RunKind.RM:
        raise RunError("the reward model must be a registered reward model", "reward_model")
    if values["at_states"]:
        check_at_states(request, values)
    if request.step_model is not None and request.step_model.kind != RunKind.PRM:
        raise RunError("the step model must be a registered process reward model", "step_model")
    if request.step_model is None and "guide_k" in request.settings:
        raise RunError("commands per guided step need a step model to choose among them", "guide_k")
    if values["decline_threshold"] is not None and request.reward_model is None:
        raise RunError("declining below a threshold needs a reward model to score", "decline_threshold")
    if request.backend != "local":
        if request.backend not in settings.SAMPLING_ENDPOINTS:
            names = ", ".join(["local", *settings.SAMPLING_ENDPOINTS])
            raise RunError(f"unknown backend; expected one of {names}", "backend")
        if request.policy is not None:
            raise RunError("an endpoint serves its own model: leave the policy empty", "policy")
    if problem := check_source(request.search, request.corpus):
        field, reason = problem
        raise RunError(reason.rstrip("."), field)
    ids = question_ids(request.questions)
    if values["at_states"] and not planned_states(ids):
        raise RunError("no finished demonstration of these questions to sample at", "questions")
    return values, ids


def planned_states(ids: list[int]) -> int:
    """The states a run at demonstration states asks its policy at (``states.state_indexes`` of each
    finished human demonstration of the questions)."""
    demonstrations = (
        Episode.objects.human()
        .filter(status=EpisodeStatus.FINISHED, question_id__in=ids)
        .annotate(steps=Count("actions"))
        .values_list("steps", flat=True)
    )
    return sum(len(state_indexes(steps)) for steps in demonstrations)


def check_at_states(request: SamplingRequest, values: dict[str, Any]) -> None:
    """A run at demonstration states writes one next action a state: nothing to score, guide or decline."""
    why = "a run at demonstration states writes one next action a state, with no answer to"
    if request.reward_model is not None:
        raise RunError(f"{why} score: leave the reward model empty", "reward_model")
    if request.step_model is not None:
        raise RunError(f"{why} guide: leave the step model empty", "step_model")
    if values["decline_threshold"] is not None:
        raise RunError(f"{why} decline", "decline_threshold")


def check_settings(given: dict[str, Any]) -> dict[str, Any]:
    values = bounded_settings(given, DEFAULTS, BOUNDS, whole=set(BOUNDS) - {"temperature"})
    if not isinstance(values["at_states"], bool):
        raise RunError("expected true or false", "at_states")
    if values["constrain_commands"] is not None and not isinstance(values["constrain_commands"], bool):
        raise RunError("expected true, false or null (the policy's default)", "constrain_commands")
    threshold = values["decline_threshold"]
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or abs(threshold) > 1e6:
            raise RunError("expected a number (a reward, 0 = the average demonstration)", "decline_threshold")
        values["decline_threshold"] = float(threshold)
    return values


def question_ids(chosen: QuestionSet) -> list[int]:
    if chosen.split and chosen.split not in Split.values:
        raise RunError(f"expected one of {', '.join(Split.values)}", "split")
    if not (chosen.batch or chosen.split or chosen.dataset):
        raise RunError("choose the questions: a demonstration batch, a split or a dataset", "questions")
    if isinstance(chosen.limit, bool) or not isinstance(chosen.limit, int):
        raise RunError("expected a whole number", "limit")
    low, high = BOUNDS["limit"]
    if not low <= chosen.limit <= high:
        raise RunError(f"must be between {low:g} and {high:g}", "limit")
    found = chosen.batch.questions.all() if chosen.batch else Question.objects.all()
    if chosen.split:
        found = found.filter(split=chosen.split)
    if chosen.dataset:
        found = found.filter(dataset=chosen.dataset)
    ids = list(found.order_by("id").values_list("pk", flat=True)[: chosen.limit])
    if not ids:
        raise RunError("no question matches this choice", "questions")
    return ids


def policy_name(policy: ModelCheckpoint | None, backend: str) -> str:
    if backend != "local":
        endpoint = settings.SAMPLING_ENDPOINTS[backend]
        return f"{backend}:{endpoint.model}"
    return policy.name if policy is not None else PROMPTED_DEFAULT


def request_sampling(user: Any, request: SamplingRequest, *, queue: bool = True) -> SamplingRun:
    """Check, create the row and queue the job once committed. Raises RunError with the reason."""
    values, ids = check_sampling(request)
    if request.step_model is None:
        values.pop("guide_k")  # unguided: no such setting on the run
    arms = 2 if request.step_model is not None else 1  # guided samples beside the unguided ones
    if values["at_states"]:  # one next action a state, no samples: n does not apply
        values["n"] = 1
        episodes = limit = planned_states(ids)  # a state is one "episode" of one "action"
    else:
        episodes = len(ids) * values["n"] * arms
        limit = episodes * values["max_actions"]
    with transaction.atomic():
        run = SamplingRun.objects.create(
            owner=user if getattr(user, "is_authenticated", False) else None,
            policy=request.policy,
            policy_name=policy_name(request.policy, request.backend),
            reward_model=request.reward_model,
            reward_model_name=request.reward_model.name if request.reward_model else "",
            step_model=request.step_model,
            step_model_name=request.step_model.name if request.step_model else "",
            backend=request.backend,
            search=request.search,
            corpus=request.corpus,
            n=values["n"],
            settings={k: v for k, v in values.items() if k not in ("n", "limit")},
            question_source=request.questions.describe(),
            question_ids=ids,
            episodes_total=episodes,
            actions_limit=limit,
        )
        log_action(user, "sampling.request", run, questions=len(ids), n=run.n, backend=run.backend)
        if queue:
            enqueue(run)
    return run


def cancel_sampling(user: Any, run: SamplingRun) -> None:
    """A queued run is cancelled at once; a running one stops after its current round of actions,
    keeping the questions it finished."""
    run.request_cancel()
    log_action(user, "sampling.cancel", run)
