"""How a caller follows a training run, and what it gets back: plain data, no torch (the web app imports
this without loading the ML stack)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def _no_progress(step: int, total: int, logs: dict[str, float]) -> None:
    return None


def _no_samples(step: int, samples: list[Any]) -> None:
    return None


def _no_resume(step: int, history: list[dict[str, float]]) -> None:
    return None


@dataclass
class Hooks:
    """How a caller follows a run: ``on_progress(step, total_steps, logs)`` at every log and validation,
    ``should_stop()`` polled after every optimizer step but the last (a cancel button, a time limit: a
    cancel read at the last step would throw the finished model away)."""

    on_progress: Callable[[int, int, dict[str, float]], None] = _no_progress
    should_stop: Callable[[], bool] = lambda: False
    # An RL run's episodes of the step just taken (training.rl.types.EpisodeReport), for the run page.
    on_samples: Callable[[int, list[Any]], None] = _no_samples
    # A run that continues from its checkpoint: the step it continues after and the logs up to it.
    on_resume: Callable[[int, list[dict[str, float]]], None] = _no_resume


@dataclass
class RunResult:
    output_dir: str
    steps: int
    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    cancelled: bool = False
    train_examples: int = 0
    validation_examples: int = 0
    resumed_from: int = 0  # the checkpoint's step when the run continued from one
