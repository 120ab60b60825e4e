"""How a training run's job follows its trainer: hooks that write the run's row (throttled) with an
estimate of when it ends, read its cancel flag, and take up the run's history again when it continues
from a checkpoint. Plain Django, no torch."""

from __future__ import annotations

import time
from collections.abc import Callable

from core.progress import Every, estimated_end
from training.models import RLEpisode, TrainingRun
from training.runs.hooks import Hooks


class Progress:
    def __init__(self, run: TrainingRun, echo: Callable[[int, int, dict], None] | None) -> None:
        self.run, self.echo, self.timeline = run, echo, []
        self.saves, self.checks = Every(), Every()
        self.first: tuple[int, float] | None = None  # (step, time) of the first report

    def on_progress(self, step: int, total: int, logs: dict[str, float]) -> None:
        self.timeline.append(logs)
        if self.echo:
            self.echo(step, total, logs)
        now = time.monotonic()
        # The rate counts from the first step reported: loading the model and data came before it.
        self.first = self.first or (step, now)
        if self.saves.due(force=any(k.startswith("eval_") for k in logs)):
            end = estimated_end(step - self.first[0], total - step, now - self.first[1])
            TrainingRun.objects.filter(pk=self.run.pk).update(
                step=step, total_steps=total, timeline=self.timeline, estimated_end_at=end
            )

    def on_resume(self, step: int, history: list[dict[str, float]]) -> None:
        """The run continues after ``step`` with the logs up to it: what a worker that died had reported
        after its checkpoint (the timeline's later steps, an RL run's later episodes) is not the run's."""
        self.timeline[:] = history
        TrainingRun.objects.filter(pk=self.run.pk).update(step=step, timeline=self.timeline)
        RLEpisode.objects.filter(run=self.run, step__gt=step).delete()
        self.run.append_log(f"Continued from the checkpoint of step {step}")

    def should_stop(self) -> bool:
        return self.checks.due() and self.run.cancel_was_requested()

    def hooks(self) -> Hooks:
        return Hooks(on_progress=self.on_progress, should_stop=self.should_stop, on_resume=self.on_resume)
