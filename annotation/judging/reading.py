"""What the judge figures read, as plain values: the labelers' judgements of a batch (the SUBMITTED ones,
less those excluded on flag review and the work a revocation excluded, as exports read them: gold items
count, as in the results' agreement), the batch's items, a run's judgements; and the figure every number is
(``result_stats.estimate``: a mean with its 95% bootstrap interval over questions)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from annotation.feedback.result_stats import Judgement, estimate
from annotation.models import Assignment, FeedbackBatch
from annotation.workforce.excluded import kept_judgements
from annotation.workforce.judgements import canonical

Figure = Callable[[Iterable[Judgement]], dict[str, Any]]


@dataclass(frozen=True)
class Human:
    """A labeler's judgement as plain values, with its order-independent form."""

    item: int
    labeler: str
    order: tuple[int, ...]
    response: Mapping[str, Any]
    judgement: dict


@dataclass(frozen=True)
class Item:
    question: int
    sides: Mapping[str, Any]


def human_judgements(batch: FeedbackBatch) -> dict[int, list[Human]]:
    """The labelers' judgements of ``batch`` by item (module docstring: which count), oldest first."""
    rows = kept_judgements(Assignment.objects.filter(item__batch=batch)).order_by("id")
    found: dict[int, list[Human]] = defaultdict(list)
    for item, name, order, response in rows.values_list("item_id", "labeler__username", "order", "response"):
        if isinstance(order, list) and isinstance(response, dict):
            judgement = canonical(batch.template, response, order, batch.preset)
            found[item].append(Human(item, name, tuple(order), response, judgement))
    return found


def batch_items(batch: FeedbackBatch) -> dict[int, Item]:
    rows = batch.items.values_list("pk", "question_id", "sides")
    return {pk: Item(question, sides if isinstance(sides, dict) else {}) for pk, question, sides in rows}


def figure_of(*, seed: int, resamples: int) -> Figure:
    """The figure of (question, score) pairs with this bootstrap's seed and resamples."""

    def figure(judgements: Iterable[Judgement]) -> dict[str, Any]:
        return estimate(judgements, seed=seed, resamples=resamples)

    return figure


def scored(scores: Iterable[tuple[int, float | None]]) -> list[Judgement]:
    """The (question, score) pairs that have a score."""
    return [(question, score) for question, score in scores if score is not None]
