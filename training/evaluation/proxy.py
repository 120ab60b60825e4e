"""The reward-model proxy evaluation of best-of-n (WebGPT Figures 5 and 8): how good is the answer that
best-of-k picks, as judged by a "validation" reward model trained on a separate split? Pure functions,
no Django, no torch.

The estimator. A sampling run drew n samples of each question; its own reward model scored them (the
"training score", ``Sample.score``) and best-of-n kept the highest. Of a question's m answered samples
(those best-of-n could choose), best-of-k for k <= m is the best by training score of k samples drawn
at random; instead of simulating draws we take the exact expectation over every k-subset: rank the m
samples by training score (a tie ranks the lower sample index higher, as ``best_of_n.choose`` breaks
it); the sample with j samples ranked below it is the best of a uniformly random k-subset with
probability C(j, k-1) / C(m, k) (the subset must hold it and k-1 of the j below it), so

    E_k = sum_j C(j, k-1) / C(m, k) * v_j        (v_j: that sample's validation score)

E_1 is the mean validation score of the answered samples and E_m that of the top-ranked one. A run
without a reward model keeps its first answer, which for a random subset is a random sample: E_k is the
mean at every k ("no selection"). The decline threshold plays no part: a declined question still has
its best-of-k.

Per run and k (1, 2, 4, ... below the largest m, and that m itself): the mean of E_k over the questions
with at least k answered samples (a best-of-k over fewer would not be one: the count says how many
are left), and the implied preference over best-of-1, the mean over the same questions of
sigmoid(E_k - E_1) (the reward model's probability that the best-of-k answer beats a best-of-1 one).
Questions are the unit of the 95% intervals: a percentile bootstrap that resamples them with
replacement, from a generator seeded afresh by the seed at each k, so an interval is the same every
time and whichever runs are evaluated with it, and the k that count the same questions share their
resamples; the score and the preference share each resample too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from annotation.feedback.result_stats import resampled_rows
from training.runs.metrics import sigmoid

DEFAULT_RESAMPLES = 1000
RESAMPLE_CHUNK = 200  # resamples drawn at a time: 200 x 10,000 questions of indices stays under 20 MB


@dataclass(frozen=True)
class ScoredSample:
    """One answered sample of a question: its index in the run, the run's reward (None: unscored run)
    and the validation reward model's."""

    index: int
    training: float | None
    validation: float


@dataclass(frozen=True)
class CurvePoint:
    """Best-of-k of one run: the mean validation score with its 95% interval, and the implied preference
    over best-of-1 with its interval, over ``questions`` questions."""

    k: int
    questions: int
    mean: float
    low: float
    high: float
    preference: float
    preference_low: float
    preference_high: float


def ladder(largest: int) -> list[int]:
    """The k of a curve: 1, 2, 4, ... below ``largest``, then ``largest`` itself (1, 2, 4, 6 for 6)."""
    if largest < 1:
        return []
    ks = [2**p for p in range(largest.bit_length()) if 2**p < largest]
    return [*ks, largest]


def ranked(samples: Sequence[ScoredSample]) -> list[ScoredSample]:
    """Best first by training score; a tie ranks the lower index higher (best_of_n's tie-break)."""
    return sorted(samples, key=lambda s: (-(s.training if s.training is not None else -math.inf), s.index))


def best_of_k(samples: Sequence[ScoredSample], k: int, *, selected: bool = True) -> float:
    """The expected validation score of best-of-k over a uniformly random k-subset of ``samples`` (the
    answered samples of one question). ``selected`` False: an unscored run, no selection (the mean)."""
    m = len(samples)
    if not 1 <= k <= m:
        raise ValueError(f"k must be between 1 and the {m} answered sample(s), not {k}")
    if not selected:
        return sum(s.validation for s in samples) / m
    subsets = math.comb(m, k)
    # ranked()[p] has j = m - 1 - p samples below it.
    return sum(
        math.comb(m - 1 - p, k - 1) / subsets * sample.validation for p, sample in enumerate(ranked(samples))
    )


def bootstrap_means(
    columns: Sequence[Sequence[float]], seed: Sequence[int], resamples: int
) -> list[tuple[float, float]]:
    """A 95% percentile interval of the mean of each column, resampling rows (questions) with
    replacement; every column uses the same resamples. Reproducible from ``seed``."""
    values = np.asarray(columns, dtype=float)  # (columns, rows)
    rows = values.shape[1]
    chunks = resampled_rows(rows, seed=list(seed), resamples=resamples, cells=RESAMPLE_CHUNK * max(rows, 1))
    drawn = np.concatenate([values[:, picked].mean(axis=2) for picked in chunks], axis=1)  # (columns, draws)
    low, high = np.quantile(drawn, [0.025, 0.975], axis=1)
    return [(float(lo), float(hi)) for lo, hi in zip(low, high, strict=True)]


def run_curve(
    questions: Sequence[Sequence[ScoredSample]],
    *,
    selected: bool = True,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> list[CurvePoint]:
    """One run's curve from the answered samples of each of its questions (a question without any is
    left out). See the module docstring for the estimator."""
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    answered = [list(samples) for samples in questions if samples]
    if not answered:
        return []
    firsts = [best_of_k(samples, 1, selected=selected) for samples in answered]
    points = []
    for k in ladder(max(len(samples) for samples in answered)):
        counted = [(i, samples) for i, samples in enumerate(answered) if len(samples) >= k]
        scores = [best_of_k(samples, k, selected=selected) for _, samples in counted]
        preferences = [sigmoid(score - firsts[i]) for score, (i, _) in zip(scores, counted, strict=True)]
        # Seeded afresh at each k: where the questions are the same, so are the resamples (a flat curve
        # has flat intervals, and neighbouring k are compared on the same draws).
        (low, high), (p_low, p_high) = bootstrap_means([scores, preferences], (seed,), resamples)
        points.append(
            CurvePoint(
                k=k,
                questions=len(counted),
                mean=sum(scores) / len(scores),
                low=low,
                high=high,
                preference=sum(preferences) / len(preferences),
                preference_low=p_low,
                preference_high=p_high,
            )
        )
    return points


def curve_rows(points: Sequence[CurvePoint]) -> list[dict[str, Any]]:
    """The curve as JSON-ready rows (an evaluation's ``results``)."""
    return [asdict(point) for point in points]
