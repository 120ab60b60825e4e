"""The statistics of a batch's results on plain values, no Django: the paper's judgement score, the
percentile bootstrap over questions, the selective-prediction curve, labeler-pair agreement, the rates of the
rating presets, and the seed and resample settings the page, CSV and API accept. ``results`` reads a batch
into these. The bootstrap's resampling (``resampled_rows``) also serves the reward-model proxy evaluation."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from annotation.feedback.scales import COMPARISON_SCALE, codes, preference_value
from core.inputs import parse_id

CONFIDENCE = 0.95
DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 2000
SEED_RANGE = (0, 2**32 - 1)
RESAMPLES_RANGE = (100, 20_000)  # fewer makes the 2.5% tails a handful of draws
# What the query parameters may be, for the API's schema.
SETTINGS_HELP = {
    "seed": f"Bootstrap seed, {SEED_RANGE[0]} to {SEED_RANGE[1]} (default {DEFAULT_SEED})",
    "resamples": f"Bootstrap resamples, {RESAMPLES_RANGE[0]} to {RESAMPLES_RANGE[1]} "
    f"(default {DEFAULT_RESAMPLES})",
}
_CHUNK_CELLS = 1_000_000  # question draws held in memory at once by the bootstrap
_WHOLE_NUMBER = re.compile(r"[0-9]{1,10}")

Judgement = tuple[int, float]  # (question id, score in [0, 1])


_SCALE = frozenset(codes(COMPARISON_SCALE))


@dataclass(frozen=True)
class Rate:
    code: str
    label: str
    fields: tuple[str, ...]  # every one "yes" for the judgement to count 1
    short: str = ""  # for a chart's axis


RATES: dict[str, tuple[Rate, ...]] = {
    "truthfulqa": (
        Rate("truthful", "Truthful", ("truthful",)),
        Rate("informative", "Informative", ("informative",)),
        Rate("truthful_informative", "Truthful and informative", ("truthful", "informative"), "T&I"),
    ),
    "gophercite": (
        Rate("plausible", "Plausible", ("plausible",)),
        Rate("supported", "Supported", ("supported",)),
        Rate("supported_plausible", "Supported and plausible (S&P)", ("supported", "plausible"), "S&P"),
    ),
}


class SettingsError(ValueError):
    """A bad seed or resample count: ``field`` names the parameter, the message says what it may be."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def parse_settings(query: Mapping[str, Any]) -> tuple[int, int]:
    """(seed, resamples) from query parameters, the defaults when absent or empty; ``SettingsError``
    naming the parameter otherwise (ASCII digits only: ``int`` would take "٣")."""
    values = []
    for name, default, (low, high) in (
        ("seed", DEFAULT_SEED, SEED_RANGE),
        ("resamples", DEFAULT_RESAMPLES, RESAMPLES_RANGE),
    ):
        raw = query.get(name, "")
        if raw == "" or raw is None:
            values.append(default)
            continue
        text = str(raw).strip()
        if not _WHOLE_NUMBER.fullmatch(text) or not low <= int(text) <= high:
            raise SettingsError(name, f"'{name}' must be a whole number from {low} to {high}.")
        values.append(int(text))
    return values[0], values[1]


def judgement_score(preference: float) -> float:
    """A preference for A in [-1, 1] as the paper scores it: 1 (A better), 0.5 (equal), 0 (B better)."""
    return 1.0 if preference > 0 else 0.5 if preference == 0 else 0.0


def resampled_rows(
    rows: int, *, seed: int | Sequence[int], resamples: int, cells: int = _CHUNK_CELLS
) -> Iterator[np.ndarray]:
    """``resamples`` draws of ``rows`` row indices with replacement, from numpy's generator seeded with
    ``seed`` (the same seed, the same draws), in chunks of at most ``cells`` indices: arrays of shape
    (draws in the chunk, rows)."""
    if rows < 1:
        raise ValueError("no rows to resample")
    rng = np.random.default_rng(seed)
    per_chunk = max(1, cells // rows)
    for start in range(0, resamples, per_chunk):
        yield rng.integers(0, rows, size=(min(per_chunk, resamples - start), rows))


def bootstrap_interval(
    sums: Sequence[float],
    counts: Sequence[int],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = CONFIDENCE,
) -> tuple[float, float]:
    """The percentile interval of sum(sums) / sum(counts) over ``resamples`` resamples of the questions
    (question i: ``sums[i]`` of its ``counts[i]`` judgement scores, counts > 0), drawn with replacement by
    numpy's generator seeded with ``seed`` (the same seed, the same interval)."""
    total, weight = np.asarray(sums, dtype=float), np.asarray(counts, dtype=float)
    stats = [
        total[picks].sum(axis=1) / weight[picks].sum(axis=1)
        for picks in resampled_rows(len(total), seed=seed, resamples=resamples)
    ]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(np.concatenate(stats), [tail, 100 - tail])
    return float(low), float(high)


def estimate(
    judgements: Iterable[Judgement], *, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> dict[str, Any]:
    """The mean score of the judgements with its bootstrap interval by question and its counts:
    ``{"value", "low", "high", "judgements", "questions"}``; value, low and high None when there are none."""
    sums: dict[int, float] = defaultdict(float)
    counts: dict[int, int] = defaultdict(int)
    for question, score in judgements:
        sums[question] += score
        counts[question] += 1
    if not counts:
        return {"value": None, "low": None, "high": None, "judgements": 0, "questions": 0}
    ids = sorted(counts)  # a fixed order, so a seed always resamples the same way
    low, high = bootstrap_interval(
        [sums[q] for q in ids], [counts[q] for q in ids], seed=seed, resamples=resamples
    )
    judged = sum(counts.values())
    return {
        "value": sum(sums.values()) / judged,
        "low": low,
        "high": high,
        "judgements": judged,
        "questions": len(ids),
    }


def side_a_answer(order: Sequence[int], sides: Mapping[str, Any]) -> int:
    """The answer on side A of a pair: the one ``sides`` names A when it names exactly one of the pair,
    else the lower answer id."""
    named = [parse_id(key) for key, side in sides.items() if side == "A"]
    if len(named) == 1 and named[0] in order:
        return named[0]
    return min(order)


def preference_for_side_a(code: Any, order: Sequence[int], side_a: int) -> float | None:
    """A rating of the pair as shown (A = ``order[0]``) as a preference for side A; None when unrated."""
    if not isinstance(code, str) or code not in _SCALE:
        return None
    value = preference_value(code)
    return value if order[0] == side_a else -value


def rate_score(response: Mapping[str, Any], fields: Sequence[str]) -> float | None:
    """1 when every field is "yes", 0 when each is answered and one is not ("no", "unsure"); None when a
    field is unanswered (the judgement is not one of this rate's)."""
    answers = [response.get(field) for field in fields]
    if any(not isinstance(answer, str) or not answer for answer in answers):
        return None
    return 1.0 if all(answer == "yes" for answer in answers) else 0.0


def selective_curve(questions: Mapping[int, tuple[float, Sequence[float]]]) -> list[dict[str, Any]]:
    """GopherCite's selective prediction. ``questions[q] = (score, judgement scores)`` of the answer q
    stands for. For each distinct score t, rising: a question is answered when its score >= t;
    ``coverage`` = answered / all questions, ``rate`` = mean judgement score of the answered ones."""
    ranked = sorted(questions.values(), key=lambda entry: -entry[0])
    points: list[dict[str, Any]] = []
    answered = judged = 0
    total = 0.0
    for position, (score, scores) in enumerate(ranked):
        answered += 1
        judged += len(scores)
        total += sum(scores)
        if position + 1 < len(ranked) and ranked[position + 1][0] == score:
            continue  # the same threshold answers every question with this score at once
        points.append(
            {
                "threshold": score,
                "coverage": answered / len(ranked),
                "answered": answered,
                "rate": total / judged if judged else None,
                "judgements": judged,
            }
        )
    return points[::-1]


def agreement_pairs(
    labels: Mapping[int, Mapping[int, Any]],
    question_of: Mapping[int, int],
    score: Callable[[Any, Any], float | None],
) -> list[Judgement]:
    """Every pair of labelers on an item (``labels[item][labeler]``) scored by ``score`` (None: not
    comparable, left out), as (question, score) so that agreement is bootstrapped like the rest."""
    pairs = []
    for item, by_labeler in labels.items():
        for first, second in combinations(sorted(by_labeler), 2):
            value = score(by_labeler[first], by_labeler[second])
            if value is not None:
                pairs.append((question_of[item], value))
    return pairs
