"""The sampling-runs source of feedback batches, as annotation sees it. Pairing runs' samples into items is
the loop's code and lives above annotation (``training/evaluation/pairing.py``), which hands its
``pair_runs`` in when the apps are ready (``provide_pairing``); annotation itself never imports training. The
runs, their samples and the rounds are read through the app registry, by the names annotation's own models
give them in their relations (``FeedbackBatch.sampling_runs`` is a relation to "training.SamplingRun")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db.models import Model

from annotation.feedback.batch_settings import BatchSettings
from annotation.models import Answer

# How the answers were put together, as FeedbackBatch.origin["pairing"] records it, in words.
PAIRINGS = {
    "samples": "two samples of one run per question",
    "runs": "the chosen answers of two runs",
    "vs_demonstrations": "a run's chosen answer against a human demonstration",
    "group": "a run's samples of a question as one ranking group",
    "chosen": "each run's chosen answer, rated on its own",
}


def run_label(run: Any) -> str:
    """A run as researchers read it on a batch: 'run 3: tiny-bc best-of-4'."""
    return f"run {run.pk}: {run.policy_name} best-of-{run.n}"


@dataclass
class Pairing:
    """What a batch from runs holds: its groups of answers, each group's sides ({} for groups and ratings),
    and the origin recorded on the batch."""

    groups: list[list[Answer]] = field(default_factory=list)
    sides: list[dict[str, str]] = field(default_factory=list)
    origin: dict[str, Any] = field(default_factory=dict)

    def add(self, answers: Sequence[Answer], sides: Sequence[str] = ()) -> None:
        self.groups.append(list(answers))
        self.sides.append({str(answer.pk): side for answer, side in zip(answers, sides, strict=False)})


_pairing: Callable[[BatchSettings], Pairing] | None = None


def provide_pairing(pair_runs: Callable[[BatchSettings], Pairing]) -> None:
    """Called once by training's app config: how a batch's answers are made from its sampling runs."""
    global _pairing
    _pairing = pair_runs


def pair_runs(config: BatchSettings) -> Pairing:
    if _pairing is None:  # training is an installed app in every configuration the project has
        raise RuntimeError("no pairing of sampling runs: the training app is not installed")
    return _pairing(config)


def sampling_runs() -> type[Model]:
    """The sampling-run model (training's), as FeedbackBatch.sampling_runs names it."""
    return apps.get_model("training", "SamplingRun")


def samples() -> type[Model]:
    return apps.get_model("training", "Sample")


def step_candidates() -> type[Model]:
    """A policy's next actions at demonstration states (training's ``StepCandidate``)."""
    return apps.get_model("training", "StepCandidate")


def rounds() -> type[Model]:
    return apps.get_model("training", "Round")
