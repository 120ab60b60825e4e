"""A judge's agreement with the labelers, on plain values (no Django): the judgements are in their
order-independent form (``workforce.judgements.canonical``), and two are scored on the task's main measure
as labelers are scored against each other (``feedback.agreement``, via ``workforce.judgements.compare``):

- comparisons: 1 the same answer preferred (or both equal), 0.5 one says equal, 0 opposite answers;
- rankings: the share of answer pairs ordered alike (a tie in one of the two: half);
- ratings: the share of choice fields chosen alike.

The **majority** of a group of judgements, unit by unit (a comparison's preferred answer; each answer pair
of a ranking; each field of a rating), is the value more than half of those who judged the unit give; a
unit without one (two labelers who disagree, say) has no majority and is left out. Agreement with the
majority is the score above against it, over the units that have one; an item none of whose units has a
majority has no such score (None)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

from annotation.feedback.agreement import preference_agreement, preference_sign
from annotation.feedback.result_stats import judgement_score, preference_for_side_a
from annotation.feedback.scales import COMPARISON_TEMPLATES, OVERALL
from annotation.workforce.judgements import FIELDS, PREFERENCE, compare, main_measure

Judgement = Mapping[str, Any]


def majority(values: Iterable[Hashable]) -> Hashable | None:
    """The value more than half of ``values`` are, or None (no values, or none has more than half)."""
    counted = Counter(values)
    total = sum(counted.values())
    for value, count in counted.most_common(1):
        if 2 * count > total:
            return value
    return None


def pair_agreement(template: str, mine: Judgement, theirs: Judgement) -> float | None:
    """Two judgements of one item scored on the main measure; None when one of them lacks it."""
    return compare(template, mine, theirs).get(main_measure(template))


def majority_agreement(template: str, mine: Judgement, others: Sequence[Judgement]) -> float | None:
    """``mine`` against the majority of ``others`` (module docstring), or None when no unit has one."""
    scores: list[float] = []
    if template in COMPARISON_TEMPLATES:
        if PREFERENCE in mine:
            found = majority(preference_sign(float(o[PREFERENCE])) for o in others if PREFERENCE in o)
            if found is not None:
                scores.append(preference_agreement(float(mine[PREFERENCE]), float(found)))
    elif template == "ranking":
        ranks = mine.get("ranks") or {}
        for first, second in combinations(sorted(ranks), 2):
            found = majority(
                preference_sign(float(r[second]) - float(r[first]))
                for r in (o.get("ranks") or {} for o in others)
                if first in r and second in r
            )
            if found is not None:
                difference = float(ranks[second]) - float(ranks[first])
                scores.append(preference_agreement(difference, float(found)))
    else:
        fields = mine.get(FIELDS) or {}
        for code, choice in fields.items():
            found = majority((o.get(FIELDS) or {})[code] for o in others if code in (o.get(FIELDS) or {}))
            if found is not None:
                scores.append(float(choice == found))
    return sum(scores) / len(scores) if scores else None


def slot_a_score(response: Mapping[str, Any] | None, order: Sequence[int]) -> float | None:
    """A comparison judgement's overall rating as SHOWN (``order[0]`` in slot A), scored for slot A: 1 A
    better or much better, 0.5 equal, 0 B better; None unrated. A judge without position bias prefers slot A
    about half the time in either order."""
    code = ((response or {}).get("ratings") or {}).get(OVERALL)
    value = preference_for_side_a(code, order, order[0]) if len(order) == 2 else None
    return judgement_score(value) if value is not None else None
