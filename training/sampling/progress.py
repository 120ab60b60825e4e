"""What a sampling run's row shows while it works (``training.sampling.jobs`` reports to it): actions
taken of at most how many, episodes finished, tokens as they are generated, the time left; a log line per
round; the cancel flag, read with each write."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from core.progress import Every, estimated_end
from training.models import SamplingRun
from training.sampling.episode import EpisodeSample

LOG_EVERY_S = 10.0  # a round's log line at most this often, so that a long run's log stays readable


class SamplingProgress:
    """What the row shows while the run works, across chunks: actions taken of at most how many (the
    figure that moves every round), episodes finished, tokens as the backend generates them (they move
    within a round, which on a CPU can take half a minute), the time left at the rate so far; written at
    most every second (``Every``), when the cancel flag is read too. A log line per round, at most every
    LOG_EVERY_S."""

    def __init__(self, run: SamplingRun, echo: Callable[[SamplingRun], None] | None) -> None:
        self.run, self.echo = run, echo
        self.max_actions = int(run.settings.get("max_actions", 1))
        self.total = run.episodes_total
        self.started = time.monotonic()
        self.saves, self.logs = Every(), Every(LOG_EVERY_S)
        self.rounds = 0
        self.before = Counts()  # the chunks already sampled
        self.chunk = Counts()  # the chunk being sampled
        self.streamed = 0  # tokens the backend reported in this chunk so far
        self.stored = 0  # episodes stored (what a cancelled run ends with)
        self.cancelled = False

    def begin(self, max_actions: int, questions: int) -> None:
        """Sampling begins (the models are loaded): the time left and tokens/s count from here."""
        self.max_actions = max_actions
        self.total = questions * self.run.n
        self.started = time.monotonic()
        SamplingRun.objects.filter(pk=self.run.pk).update(**self.fields())

    def cancel_requested(self) -> bool:
        """Whether the run's cancel flag is set (read from the row until it is)."""
        self.cancelled = self.cancelled or self.run.cancel_was_requested()
        return self.cancelled

    def on_tokens(self, count: int) -> None:
        self.streamed += count
        self.save_soon()

    def on_round(self, samples: Sequence[EpisodeSample], running: int, stored_questions: int) -> None:
        """After a round of the chunk ``samples``: ``running`` of them still browse."""
        self.rounds += 1
        self.chunk = Counts.of(samples, self.max_actions)
        self.save_soon()
        if self.logs.due():
            done = self.before + self.chunk
            self.run.append_log(
                f"round {self.rounds}: {running} episode(s) browsing, {done.ended} of {self.total} "
                f"finished, {done.actions} actions taken; {stored_questions} question(s) stored"
            )

    def chunk_done(self) -> None:
        self.before = self.before + self.chunk
        self.chunk, self.streamed = Counts(), 0
        self.save()

    def fields(self, final: bool = False) -> dict[str, Any]:
        done = self.before + self.chunk
        elapsed = max(time.monotonic() - self.started, 1e-9)
        tokens = self.before.tokens + max(self.chunk.tokens, self.streamed)
        limit = self.total * self.max_actions - done.spared
        return {
            # A cancelled run's episodes count what was stored: half-browsed ones are dropped.
            "episodes_done": self.stored if final else done.ended,
            "actions_done": done.actions,
            "actions_limit": limit,
            "tokens_generated": tokens,
            "tokens_per_second": tokens / elapsed,
            "estimated_end_at": estimated_end(done.actions, limit - done.actions, elapsed),
        }

    def save_soon(self) -> None:
        if self.saves.due():
            self.save(counted=True)

    def save(self, counted: bool = False) -> None:
        if not counted:
            self.saves.due(force=True)  # the next save_soon counts from this save
        fields = self.fields()
        SamplingRun.objects.filter(pk=self.run.pk).update(**fields)
        if self.echo:
            self.run.__dict__.update(fields)
            self.echo(self.run)
        self.cancel_requested()


class Counts:
    """Episodes that ended, actions taken, the actions that ended episodes left unused, tokens."""

    def __init__(self, ended: int = 0, actions: int = 0, spared: int = 0, tokens: int = 0) -> None:
        self.ended, self.actions, self.spared, self.tokens = ended, actions, spared, tokens

    @classmethod
    def of(cls, samples: Sequence[EpisodeSample], max_actions: int) -> Counts:
        ended = [sample for sample in samples if sample.finished]
        return cls(
            ended=len(ended),
            actions=sum(len(sample.steps) for sample in samples),
            spared=sum(max_actions - len(sample.steps) for sample in ended),
            tokens=sum(sample.tokens_generated for sample in samples),
        )

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.ended + other.ended,
            self.actions + other.actions,
            self.spared + other.spared,
            self.tokens + other.tokens,
        )
