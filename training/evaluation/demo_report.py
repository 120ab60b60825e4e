"""The demo report (issue 39), one button on the Experiment reports page: the policies a newcomer has, on
a few TriviaQA eval questions, side by side. Their benchmark runs are queued on the sampling worker and the
report is made at once; its figures fill in as the runs finish (minutes on a CPU).

The policies: the prompted SmolLM2-135M default answering once; the same best-of-2 against the newest
reward model this user can see (the demo trains one as ``make run`` starts); and the newest BC model, when
one has been trained (the demo has no demonstrations to train one from until people make them). Tiny models
on four questions: the page says the numbers show the loop working, not which policy is better."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotation.models import Question, Split
from core.models import log_action
from core.permissions import AnyUser
from training.errors import RunError
from training.evaluation.benchmark_runs import DATASETS, BenchmarkRequest, request_benchmark
from training.evaluation.experiments import PolicyKey
from training.models import Benchmark, Experiment, ModelCheckpoint, RunKind
from training.sampling.runs import SamplingRequest, policy_name

DEMO_REPORT_PREFIX = "Demo on TriviaQA: "
DEMO_QUESTIONS = 4
NOTES = (
    "Queued from the console: TriviaQA's first 4 eval questions, 10 actions an episode, on this machine's "
    "CPU. Tiny models and 4 questions: the numbers show the loop working, not which policy is better."
)
DEMO_SETTINGS: dict[str, Any] = {"max_actions": 10, "temperature": 0.8, "seed": 0}


def demo_policies(user: AnyUser) -> list[tuple[ModelCheckpoint | None, ModelCheckpoint | None, int]]:
    """(policy, reward model, n) of each policy of the demo report."""
    models = ModelCheckpoint.objects.visible_to(user)
    reward_model = models.filter(kind=RunKind.RM).order_by("-pk").first()
    bc = models.filter(kind=RunKind.BC).order_by("-pk").first()
    chosen: list[tuple[ModelCheckpoint | None, ModelCheckpoint | None, int]] = [(None, None, 1)]
    if reward_model is not None:
        chosen.append((None, reward_model, 2))
    if bc is not None:
        chosen.append((bc, None, 1))
    return chosen


def make_demo_report(user: AnyUser) -> Experiment:
    """Queue each policy's TriviaQA run and make the report; RunError when there is nothing to answer."""
    if not Question.objects.filter(dataset=DATASETS[Benchmark.TRIVIAQA], split=Split.EVAL).exists():
        raise RunError("the demo's TriviaQA questions are not loaded: run manage.py load_demo", "")
    keys, names = [], []
    with transaction.atomic():
        for policy, reward_model, n in demo_policies(user):
            sampling = SamplingRequest(
                policy=policy, reward_model=reward_model, settings=DEMO_SETTINGS | {"n": n}
            )
            request_benchmark(user, BenchmarkRequest(Benchmark.TRIVIAQA, sampling, limit=DEMO_QUESTIONS))
            chooser = reward_model.name if reward_model is not None and n > 1 else ""
            keys.append(PolicyKey(policy_name(policy, "local"), n, chooser))
            names.append(
                "a BC model" if policy is not None else "best-of-2" if n > 1 else "the prompted default"
            )
        # Made now, not checked for finished runs: the runs just queued are its evidence.
        experiment = Experiment.objects.create(
            name=DEMO_REPORT_PREFIX + ", ".join(names),
            notes=NOTES,
            policies=[key.stored() for key in keys],
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        log_action(user, "experiment.demo", experiment, policies=len(keys))
    return experiment
