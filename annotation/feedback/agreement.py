"""Agreement between labelers, accuracy on gold items, and preference rates (plain Python).

Two preferences x, y in [-1, 1] (from A's point of view of the SAME answer order; callers undo the
randomised display order first) are scored by their signs (|v| <= 1e-9 counts as "equal"):

    s(x, y) = 1    if sign(x) == sign(y)        (same answer preferred, or both say equal)
              0.5  if exactly one of them is 0  (one says equal)
              0    if sign(x) == -sign(y) != 0  (opposite answers preferred)

The strength ("better" vs "much better") is ignored, as in WebGPT's reward-model training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

_EPSILON = 1e-9
Z95 = 1.959963984540054  # the two-sided 95% quantile of the standard normal

Ranking = Mapping[str, float]


def preference_sign(value: float) -> int:
    """Which answer a preference prefers: 1 (A), -1 (B), 0 (equal: |value| <= 1e-9)."""
    if abs(value) <= _EPSILON:
        return 0
    return 1 if value > 0 else -1


def preference_agreement(x: float, y: float) -> float:
    """s(x, y) above: 1, 0.5 or 0."""
    sx, sy = preference_sign(x), preference_sign(y)
    if sx == sy:
        return 1.0
    return 0.5 if sx == 0 or sy == 0 else 0.0


def comparison_agreement(labels: Mapping[str, Mapping[str, float]]) -> dict[str, float | None]:
    """Per labeler: labels[item][labeler] = preference for A. For labeler l, over the items I_l that l
    shares with at least one other labeler:

        agreement(l) = (1 / |I_l|) * sum_{i in I_l} mean_{m on i, m != l} s(x_il, x_im)

    (each item weighs the same however many others labeled it). None when l shares no item.
    """
    return _per_labeler(labels, preference_agreement)


def gold_accuracy(labels: Mapping[str, float], gold: Mapping[str, float]) -> float | None:
    """One labeler's labels[item] against gold[item]: mean of s(label, gold) over the items in both;
    None when there are none."""
    scores = [preference_agreement(value, gold[item]) for item, value in labels.items() if item in gold]
    return sum(scores) / len(scores) if scores else None


def ranking_pair_agreement(first: Ranking, second: Ranking) -> float | None:
    """Two rankings (answer -> rank, 1 = best, ties allowed) of the same answers: over the pairs of answers
    both ranked, the mean of s(order in first, order in second), i.e. 1 when a pair is ordered the same
    way (or tied in both), 0.5 when tied in exactly one, 0 when reversed. None with fewer than two answers
    in common."""
    common = sorted(set(first) & set(second))
    scores = [
        preference_agreement(first[v] - first[u], second[v] - second[u]) for u, v in combinations(common, 2)
    ]
    return sum(scores) / len(scores) if scores else None


def ranking_agreement(rankings: Mapping[str, Mapping[str, Ranking]]) -> dict[str, float | None]:
    """Per labeler: rankings[item][labeler] = {answer: rank}, answers named the same for every labeler
    (e.g. answer ids, not display positions). As ``comparison_agreement`` with ``ranking_pair_agreement``
    as the per-item score; pairs of rankings with no answer pair in common are left out."""
    return _per_labeler(rankings, ranking_pair_agreement)


def preference_rate(results: Sequence[float]) -> tuple[float, float, float]:
    """(rate, low, high): how often the subject is preferred, with a 95% Wilson score interval.

    Each result is a preference in [-1, 1] from the subject's point of view (e.g. ``preference_value`` of
    the policy's side): > 0 a win (1), 0 a tie (0.5), < 0 a loss (0). Ties enter as half wins; since
    p(1-p) is the largest variance a [0, 1] score with mean p can have, the interval is then slightly
    conservative. ``ValueError`` when there are no results.
    """
    n = len(results)
    if n == 0:
        raise ValueError("no results to rate")
    wins = sum(1.0 if preference_sign(r) > 0 else 0.5 if preference_sign(r) == 0 else 0.0 for r in results)
    return (wins / n, *wilson_interval(wins, n))


# The one Wilson interval of the project, used here and by training.runs.metrics (reward-model accuracy).
# It lives in annotation.feedback because that package is plain Python (no Django, no torch) and training
# already sits above annotation (it trains on annotation's exports), so training importing it points
# down the dependency arrows; browser/engine, the other shared floor, is the browsing environment.
def wilson_interval(successes: float, total: int, z: float = Z95) -> tuple[float, float]:
    """The 95% (by default) Wilson score interval of ``successes`` out of ``total``: sound at small counts
    and near 0 or 1, unlike the normal one. ``successes`` may be fractional (a tie as half a win). With
    n = total and p = successes / n:

        low, high = (p + z²/2n ± z * sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)

    (0, 1) when there is nothing to count."""
    if total == 0:
        return (0.0, 1.0)
    p = successes / total
    z2 = z * z
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    # At no or all successes the bound is exactly 0 or 1 (the float sum can land a hair inside).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    return (low, 1.0 if successes == total else min(1.0, centre + half))


def _per_labeler(
    labels: Mapping[str, Mapping[str, Any]], score: Callable[[Any, Any], float | None]
) -> dict[str, float | None]:
    item_means: dict[str, list[float]] = {}
    for by_labeler in labels.values():
        for labeler, mine in by_labeler.items():
            item_means.setdefault(labeler, [])
            scores = [score(mine, theirs) for other, theirs in by_labeler.items() if other != labeler]
            kept = [s for s in scores if s is not None]
            if kept:
                item_means[labeler].append(sum(kept) / len(kept))
    return {labeler: (sum(m) / len(m) if m else None) for labeler, m in item_means.items()}
