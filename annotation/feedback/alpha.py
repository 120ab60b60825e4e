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
    per_item = _item_coincidences(pairable, scale, clusters or {})
    total = per_item.sum(axis=0)
    value = _alphas(total[np.newaxis], level)[0]
    n = sum(len(values) for values in pairable.values())
    base = Alpha(
        None if np.isnan(value) else float(value),
        level,
        units=len(pairable),
        items=len(per_item),
        values=n,
        no_variation=bool(np.isnan(value)),
    )
    if resamples <= 0:
        return base
    # Items with the same coincidence matrix are interchangeable: drawing len(items) items with
    # replacement, how many of each kind are drawn is multinomial with the kinds' shares. A batch has few
    # kinds (two or three judgements on a 5-point scale), so each draw costs the kinds, not the items.
    kinds, counts = np.unique(per_item.reshape(len(per_item), -1), axis=0, return_counts=True)
    kinds = kinds.reshape(len(kinds), *per_item.shape[1:])
    draws = np.concatenate(
        [
            _alphas(np.tensordot(weights, kinds, axes=1), level)
            for weights in _weights(counts, resamples, seed)
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


def _item_coincidences(
    pairable: Mapping[Hashable, list], scale: list, clusters: Mapping[Hashable, Hashable]
) -> np.ndarray:
    """Each item's coincidence matrix (items, V, V): the sum of its units' (alpha needs only the sums);
    items in the order first seen."""
    index = {value: i for i, value in enumerate(scale)}
    item_of = [clusters.get(unit, ("unit", unit)) for unit in pairable]
    row_of = {item: i for i, item in enumerate(dict.fromkeys(item_of))}
    size = len(scale)
    counts = np.zeros((len(pairable), size))  # n_uc
    unit_rows = [row for row, values in enumerate(pairable.values()) for _ in values]
    np.add.at(counts, (unit_rows, [index[value] for values in pairable.values() for value in values]), 1)
    each = counts.sum(axis=1)  # m_u
    per_unit = counts[:, :, np.newaxis] * counts[:, np.newaxis, :]
    per_unit -= counts[:, :, np.newaxis] * np.eye(size)
    per_unit /= (each - 1)[:, np.newaxis, np.newaxis]
    per_item = np.zeros((len(row_of), size, size))
    np.add.at(per_item, [row_of[item] for item in item_of], per_unit)
    return per_item


def _weights(counts: np.ndarray, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """For each of ``resamples`` draws of sum(counts) items with replacement, how many of each kind of
    item (``counts[k]`` items of kind k) it holds, (draws, kinds) per chunk, from numpy's generator seeded
    with ``seed`` (the same seed, the same draws)."""
    rng = np.random.default_rng(seed)
    total = int(counts.sum())
    per_chunk = max(1, _CHUNK_CELLS // len(counts))
    for start in range(0, resamples, per_chunk):
        yield rng.multinomial(total, counts / total, size=min(per_chunk, resamples - start)).astype(float)


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
