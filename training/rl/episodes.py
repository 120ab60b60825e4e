"""An RL run's episodes, every one of every step (RLEpisode rows): written by the job as it trains, read
by the API and the run page's download. Each keeps what it put into its step's objective, so that the
step's logged figures can be recomputed from the rows alone (docs/training.md, "Auditing a run"; checked
by tests/test_rl_audit.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotation.models import Question
from training.models import RLEpisode, TrainingRun
from training.rl.types import EpisodeReport

# An episode as the API and the download give it, in this order.
EPISODE_FIELDS = (
    "run", "step", "index", "question", "question_text", "kind", "quotes", "answered", "answer", "commands",
    "invalid_actions", "answer_tokens", "reward", "group", "baseline", "scale", "advantage", "tokens", "kl",
    "kl_penalty", "entropy",
)  # fmt: skip


def record_step(run: TrainingRun, step: int, reports: list[EpisodeReport]) -> list[RLEpisode]:
    """The step's episodes as rows, in one insert. A question deleted while the run trained is kept by
    its text alone (the row's question is then empty, as it would become had it been deleted later)."""
    asked = {report.question_id for report in reports}
    existing = set(Question.objects.filter(pk__in=asked).values_list("pk", flat=True))
    rows = [episode_row(run, step, index, report, existing) for index, report in enumerate(reports)]
    return RLEpisode.objects.bulk_create(rows)


def episode_row(
    run: TrainingRun, step: int, index: int, report: EpisodeReport, existing: set[int]
) -> RLEpisode:
    terms = report.terms
    if terms is None:  # the trainer sets them on every episode before it reports the step
        raise ValueError(f"episode {index} of step {step} has no terms of the objective")
    return RLEpisode(
        run=run,
        step=step,
        index=index,
        question_id=report.question_id if report.question_id in existing else None,
        question_text=report.question,
        kind=report.kind,
        quotes=[quote.to_dict() for quote in report.quotes],
        answered=report.answer is not None,
        answer=report.answer or "",
        commands=list(report.commands),
        invalid_actions=report.invalid_actions,
        answer_tokens=report.answer_tokens,
        reward=report.reward,
        group=terms.group,
        baseline=terms.baseline,
        scale=terms.scale,
        advantage=terms.advantage,
        tokens=terms.tokens,
        kl=terms.kl,
        kl_penalty=terms.kl_penalty,
        entropy=terms.entropy,
    )


def episode_records(run: TrainingRun, chunk: int = 500) -> Iterator[dict[str, Any]]:
    """The run's episodes by step and index, each as a dict of EPISODE_FIELDS (read in chunks: a long run
    has many)."""
    return run.episodes.order_by("step", "index").values(*EPISODE_FIELDS).iterator(chunk_size=chunk)
