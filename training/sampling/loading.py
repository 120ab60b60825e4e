"""What a sampling job loads: the policy (a registered BC or RL model, the prompted SmolLM2 default, or an
operator's endpoint) over its backend, and the reward model that scores. Loads torch: workers only."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotation.models import EpisodeAction, EpisodeKind
from training.checkpoints import local_folder
from training.models import SamplingRun
from training.rl.config import BC, saved_policy_format
from training.sampling.best_of_n import RewardScorer
from training.sampling.endpoints import backend_from
from training.sampling.episode import Policy
from training.sampling.policies import BCPolicy, PromptedPolicy
from training.sampling.runs import PROMPTED_DEFAULT

# One of each kind of command, in the order a demonstration goes: the prompted model's worked examples.
EXAMPLE_KINDS = ("Search ", "Clicked on link", "Quote:", "End: Answer")


def load_policy(run: SamplingRun) -> Policy:
    if run.backend != "local":
        endpoint = settings.SAMPLING_ENDPOINTS.get(run.backend)
        if endpoint is None:
            raise ValueError(f"the endpoint {run.backend!r} is no longer configured (SAMPLING_ENDPOINTS)")
        backend = backend_from(endpoint)
        if endpoint.policy == "bc":
            return BCPolicy(backend)
        return PromptedPolicy(backend, demonstrations=examples(run))
    # torch: loaded in the worker only, not in every process that imports this module
    from training.sampling.local import LocalBackend

    if run.policy_id is None and run.policy_name != PROMPTED_DEFAULT:
        raise ValueError(f"the policy {run.policy_name} was deleted from the registry")
    model_dir = local_folder(run.policy) if run.policy else None  # downloaded once per worker, if need be
    backend = LocalBackend(model_dir, threads=settings.SAMPLING_THREADS, store=Path(settings.MODEL_STORE_DIR))
    # An RL policy is asked as the policy it started from was (its training.json says which).
    if model_dir is not None and saved_policy_format(model_dir) == BC:
        return BCPolicy(backend)
    return PromptedPolicy(backend, demonstrations=examples(run))


def load_scorer(run: SamplingRun) -> RewardScorer | None:
    if run.reward_model_id is None:
        if run.reward_model_name:
            raise ValueError(f"the reward model {run.reward_model_name} was deleted from the registry")
        return None
    return RewardScorer(local_folder(run.reward_model))


def load_step_scorer(run: SamplingRun) -> RewardScorer | None:
    """The process reward model that guides half the run's samples (None: the run is unguided)."""
    if run.step_model_id is None:
        if run.step_model_name:
            raise ValueError(f"the step model {run.step_model_name} was deleted from the registry")
        return None
    return RewardScorer(local_folder(run.step_model), kind="prm")


def examples(run: SamplingRun) -> list[tuple[str, str]]:
    """Up to ``examples`` (observation, command) pairs from human demonstrations of other questions, one
    per kind of command (a search, a click, a quote, the end), so the prompted model sees how each is
    written on a real page. None when nobody has demonstrated yet: the instructions alone then."""
    wanted = int(run.settings.get("examples", 0))
    found: list[tuple[str, str]] = []
    actions = (
        EpisodeAction.objects.filter(episode__kind=EpisodeKind.HUMAN, valid=True)
        .exclude(episode__question_id__in=run.question_ids)
        .order_by("episode_id", "index")
    )
    for kind in EXAMPLE_KINDS[:wanted]:
        action = actions.filter(command__startswith=kind).only("observation_before", "command").first()
        if action is not None:
            found.append((action.observation_before, action.command))
    return found
