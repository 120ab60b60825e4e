"""A judge run's verdict on each item: the item is asked in both orders, and the verdict counts only when
the two answers agree on the task's main measure.

Each of the two judgements is turned into its order-independent form (``workforce.judgements.canonical``:
the overall preference for the answer with the lower id; the rank of each answer id; the choice of each
rating field), and the two are ``consistent`` when they agree on the main measure:

- comparisons: the same answer preferred, or both say equal (the strength, "better" or "much better", is
  ignored, as everywhere agreement is scored);
- rankings: the same order of the answers (ties alike);
- ratings: the same choice in every choice field.

A judgement the judge's output could not be read into (``ModelJudgement.response`` None) or that lacks the
main measure (a flagged question, no ranks) leaves the item without a verdict: ``consistent`` is None, as
for an item not yet asked in both orders. The verdict's confidence is the mean of the two orders'
confidences (None unless both give one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.agreement import preference_sign
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.models import JudgeRun, ModelJudgement
from annotation.workforce.judgements import FIELDS, PREFERENCE, canonical


@dataclass(frozen=True)
class Asked:
    """One of the judge's judgements of an item as plain values (a ``ModelJudgement`` row)."""

    swapped: bool
    order: tuple[int, ...]
    response: Mapping[str, Any] | None
    confidence: float | None = None


@dataclass(frozen=True)
class Verdict:
    """The judge on one item (``answers``: its answer ids, ascending): each order's canonical judgement (None:
    not asked yet, or unreadable), whether they agree on the main measure (None: not both readable), the
    verdict (the canonical judgement both orders give; for comparisons the mean of their preferences) when
    they do, and its confidence."""

    item: int
    answers: tuple[int, ...]
    first: dict | None
    second: dict | None
    consistent: bool | None
    judgement: dict | None
    confidence: float | None

    @property
    def counts(self) -> bool:
        """Whether the verdict counts: both orders read, and in agreement."""
        return self.consistent is True

    @property
    def preference(self) -> float | None:
        """A comparison verdict's preference for the answer with the lower id, in [-1, 1]."""
        value = (self.judgement or {}).get(PREFERENCE)
        return float(value) if value is not None else None


def main_value(template: str, judgement: Mapping[str, Any] | None) -> Hashable | None:
    """What the main measure says, comparable with ``==`` across orders: a comparison's preferred answer (1
    the lower id, -1 the higher, 0 equal); a ranking's dense ranks by answer id; a rating's choices by field.
    None when the judgement lacks it."""
    if judgement is None:
        return None
    if template in COMPARISON_TEMPLATES:
        value = judgement.get(PREFERENCE)
        return preference_sign(float(value)) if value is not None else None
    if template == "ranking":
        ranks = judgement.get("ranks") or {}
        if len(ranks) < 2:
            return None
        dense = {rank: position for position, rank in enumerate(sorted(set(ranks.values())), start=1)}
        return tuple(sorted((answer, dense[rank]) for answer, rank in ranks.items()))
    fields = judgement.get(FIELDS) or {}
    return tuple(sorted(fields.items())) if fields else None


def verdict(template: str, item: int, asked: Iterable[Asked], preset: str = "") -> Verdict:
    """The verdict on ``item`` from its judgements (one per order; a missing order leaves it undecided)."""
    by_order: dict[bool, Asked] = {one.swapped: one for one in asked}
    first, second = (
        canonical(template, one.response, one.order, preset) if one and one.response is not None else None
        for one in (by_order.get(False), by_order.get(True))
    )
    values = (main_value(template, first), main_value(template, second))
    consistent = None if None in values else values[0] == values[1]
    given = [one.confidence for one in by_order.values() if one.confidence is not None]
    confidence = sum(given) / 2 if len(given) == 2 else None
    agreed = _agreed(template, first, second) if consistent and first and second else None
    answers = tuple(sorted(next(iter(by_order.values())).order)) if by_order else ()
    return Verdict(item, answers, first, second, consistent, agreed, confidence)


def _agreed(template: str, first: dict, second: dict) -> dict:
    """The verdict both orders give: a comparison's preference is their mean (strengths may differ)."""
    if template in COMPARISON_TEMPLATES:
        return {PREFERENCE: (float(first[PREFERENCE]) + float(second[PREFERENCE])) / 2}
    return first


def verdicts(template: str, rows: Iterable[tuple[int, Asked]], preset: str = "") -> dict[int, Verdict]:
    """A verdict per item of ``rows`` ((item, judgement) pairs), by item id."""
    grouped: dict[int, list[Asked]] = defaultdict(list)
    for item, asked in rows:
        grouped[item].append(asked)
    return {item: verdict(template, item, asked, preset) for item, asked in sorted(grouped.items())}


def run_judgements(run: JudgeRun) -> list[tuple[int, Asked]]:
    """The run's judgements so far as (item, judgement), by item then order (one query)."""
    rows = ModelJudgement.objects.filter(run=run).order_by("item_id", "swapped")
    return [
        (item, Asked(swapped, tuple(order) if isinstance(order, list) else (), _dict(response), confidence))
        for item, swapped, order, response, confidence in rows.values_list(
            "item_id", "swapped", "order", "response", "confidence"
        )
    ]


def run_verdicts(run: JudgeRun) -> dict[int, Verdict]:
    """The verdict on every item ``run`` has judged so far, by item id."""
    return verdicts(run.batch.template, run_judgements(run), run.batch.preset)


def verdict_counts(found: Mapping[int, Verdict] | Sequence[Verdict]) -> dict[str, int]:
    """How many items were judged, read in both orders, consistent, and flipped with the order."""
    values = list(found.values()) if isinstance(found, Mapping) else list(found)
    return {
        "judged": len(values),
        "both_orders": sum(v.consistent is not None for v in values),
        "consistent": sum(v.consistent is True for v in values),
        "flipped": sum(v.consistent is False for v in values),
    }


def _dict(response: Any) -> dict | None:
    return response if isinstance(response, dict) else None
