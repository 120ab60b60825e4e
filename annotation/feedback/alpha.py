"""Krippendorff's alpha for nominal and ordinal data, with a percentile bootstrap interval by item
(plain Python and numpy, no Django).

Input: units -> {coder: value}; a coder who did not judge a unit is simply absent (or None). Only
*pairable* units, those with at least two values, enter; the others are dropped. From the pairable values
Krippendorff's coincidence matrix is built (unit u with m_u values and n_uc of them equal to c):

    o_ck = sum_u (n_uc * n_uk - [c == k] * n_uc) / (m_u - 1)        n_c = sum_k o_ck,  n = sum_c n_c

and alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_ck o_ck d_ck / sum_ck n_c n_k d_ck, with the distance

    nominal:  d_ck = 0 if c == k else 1
    ordinal:  d_ck = (sum_{g from c to k} n_g - (n_c + n_k) / 2)^2      (c, k in the scale's order)

(Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011): the ordinal distance counts how many
pairable values lie between two values, so it depends on the data's own marginals, not on the numbers
the scale's points are written with.

Decisions:
- No pairable unit: alpha is None (nothing to measure).
- Every pairable value the same (all coders agree and the data has no variation): D_e = 0 and alpha is
  0/0, undefined; it is reported as None with ``no_variation`` set, never as 1. Data without variation
  cannot tell reliable coders from ones who always say the same thing (Krippendorff 2011, section "No
  variation"). Coders who agree on every unit while units differ get alpha = 1 as usual.
- The bootstrap draws *items* with replacement (``clusters``: several units of one item, e.g. the answers
  of one ranking, are drawn together; by default each unit is its own item) and recomputes alpha, ordinal
  distances included, on each draw; draws without variation are left out; the interval is the 2.5th and
  97.5th percentile. This is the bootstrap over questions the results page uses, not Krippendorff's own
  algorithm (which resamples pairs of values); with few items it is wide, as it should be.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

Level = Literal["nominal", "ordinal"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal")
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
_CHUNK_CELLS = 2_000_000  # item weights held in memory at once by the bootstrap


@dataclass(frozen=True)
class Alpha:
    """Krippendorff's alpha (None: no pairable unit, or no variation) with its bootstrap interval
    (None without a defined draw), the pairable units, the items they belong to, the pairable values (n
    of the formulas) and whether the data had no variation."""

    alpha: float | None
    level: Level
    units: int
    items: int
    values: int
    low: float | None = None
    high: float | None = None
    resamples: int = 0
    no_variation: bool = False

    @property
    def defined(self) -> bool:
        return self.alpha is not None


def krippendorff_alpha(
    units: Mapping[Hashable, Mapping[Hashable, Hashable | None]],
    level: Level = "nominal",
    *,
    domain: Sequence[Hashable] | None = None,
    clusters: Mapping[Hashable, Hashable] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> Alpha:
    """Alpha of ``units`` (unit -> {coder: value}) at ``level``, with a bootstrap interval over items.

    ``domain``: the scale's values in order (required to order non-numeric ordinal values; by default the
    sorted values seen). A value outside it is a ``ValueError``. ``clusters``: unit -> item, the units
    drawn together by the bootstrap (default: each unit alone). ``resamples`` 0 skips the interval.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    pairable = {
        unit: [value for value in by_coder.values() if value is not None] for unit, by_coder in units.items()
    }
    pairable = {unit: values for unit, values in pairable.items() if len(values) >= 2}
    if not pairable:
        return Alpha(None, level, 0, 0, 0)
    scale = _scale(pairable, domain)
    index = {value: i for i, value in enumerate(scale)}
    # Each item's coincidence matrix, the sum of its units' (alpha only needs the sums).
    item_of = {unit: (clusters or {}).get(unit, ("unit", unit)) for unit in pairable}
    items = list(dict.fromkeys(item_of[unit] for unit in pairable))
    row_of = {item: i for i, item in enumerate(items)}
    size = len(scale)
    per_item = np.zeros((len(items), size, size))
    for unit, values in pairable.items():
        counts = np.bincount([index[value] for value in values], minlength=size).astype(float)
        per_item[row_of[item_of[unit]]] += (np.outer(counts, counts) - np.diag(counts)) / (len(values) - 1)
    total = per_item.sum(axis=0)
    value = _alphas(total[np.newaxis], level)[0]
    n = sum(len(values) for values in pairable.values())
    base = Alpha(
        None if np.isnan(value) else float(value),
        level,
        units=len(pairable),
        items=len(items),
        values=n,
        no_variation=bool(np.isnan(value)),
    )
    if resamples <= 0:
        return base
    draws = np.concatenate(
        [
            _alphas(np.tensordot(weights, per_item, axes=1), level)
            for weights in _weights(len(items), resamples, seed)
        ]
    )
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return replace(base, resamples=resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return replace(base, low=float(low), high=float(high), resamples=resamples)


def _scale(pairable: Mapping[Hashable, list], domain: Sequence[Hashable] | None) -> list:
    seen = {value for values in pairable.values() for value in values}
    if domain is None:
        try:
            return sorted(seen)  # type: ignore[type-var]
        except TypeError as error:
            raise ValueError("values of mixed types need a domain that orders them") from error
    scale = list(dict.fromkeys(domain))
    outside = seen - set(scale)
    if outside:
        raise ValueError(f"values outside the domain: {sorted(map(repr, outside))}")
    return scale


def _weights(items: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """How often each item is drawn in each of ``resamples`` draws of ``items`` items with replacement,
    (draws, items) per chunk, from numpy's generator seeded with ``seed`` (the same seed, the same draws)."""
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _CHUNK_CELLS // items)
    uniform = np.full(items, 1 / items)
    for start in range(0, resamples, per_chunk):
        yield rng.multinomial(items, uniform, size=min(per_chunk, resamples - start)).astype(float)


def _alphas(coincidences: np.ndarray, level: Level) -> np.ndarray:
    """Alpha of each coincidence matrix in ``coincidences`` (shape (draws, V, V)); NaN where undefined."""
    marginals = coincidences.sum(axis=2)  # n_c, per draw
    n = marginals.sum(axis=1)
    size = coincidences.shape[1]
    if level == "nominal":
        distance = np.broadcast_to(1.0 - np.eye(size), coincidences.shape)
    else:
        # sum_{g=c..k} n_g for c <= k is cum[k] - cum[c] + n_c; the matrix is symmetric.
        cum = np.cumsum(marginals, axis=1)
        low = np.minimum.outer(np.arange(size), np.arange(size))
        high = np.maximum.outer(np.arange(size), np.arange(size))
        between = cum[:, high] - cum[:, low] + marginals[:, low]
        distance = (between - (marginals[:, low] + marginals[:, high]) / 2) ** 2
    observed = (coincidences * distance).sum(axis=(1, 2))
    expected = (marginals[:, :, np.newaxis] * marginals[:, np.newaxis, :] * distance).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        result = 1 - (n - 1) * observed / expected
    return np.where(expected > 0, result, np.nan)
