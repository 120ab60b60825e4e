"""Axes and text fitting for the charts the server draws as SVG (``core.plot``,
``annotation.feedback.results_plot``). Pure Python, no Django.

Axis ranges follow what the numbers mean, so that the picture does not exaggerate:

- A quantity with a known range (accuracy, a share, a rate, a preference: ``UNIT``) is drawn on all of it:
  0.72 and 0.74 sit close together on a 0 to 1 axis.
- Any other value axis includes zero when the values keep one sign and spread over at least a sixth of their
  largest magnitude (a falling loss is seen against zero); a narrower band far from zero (a loss from 0.70 to
  0.69) gets an axis at least a sixth of that magnitude wide, centred on it, so a change of 1% of the value
  moves the line by at most 6% of the axis.
- A lone value is drawn in the middle of an axis from zero to twice it (step 1 on 0..2), or on -1..1 for 0.
- An x axis spans the data (or its known range); it is not zoomed out.

Ticks are Heckbert's "nice numbers" (Graphics Gems, 1990): 1, 2 or 5 times a power of ten, the axis widened to
whole ticks, whole numbers only where every value is whole; labels have as many decimals as the tick step,
thousands separated, never "-0".

Text is measured with advances on the wide side of DejaVu Sans at the charts' font size (site.css, ``.chart
text``), so that text laid out to fit also fits in the narrower common sans-serif fonts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

UNIT = (0.0, 1.0)
MIN_SPAN_SHARE = 1 / 6
RESOLUTION = 1e-12  # a spread below this share of the values' magnitude is drawn as one value
TICKS = 5  # about this many ticks on an axis
FONT_SIZE = 11  # px: .chart text in site.css
LINE = 13  # px between the baselines of a wrapped label's lines
ELLIPSIS = "…"

# Advances in em, rounded up from DejaVu Sans; everything not listed takes DEFAULT_ADVANCE (digits 0.636).
_ADVANCES = {
    **dict.fromkeys(" .,:;'!|il", 0.32),
    **dict.fromkeys("()[]{}-/\\frtjI", 0.43),
    **dict.fromkeys("mwMW@%…—", 1.0),
}
DEFAULT_ADVANCE, UPPER_ADVANCE = 0.64, 0.78


@dataclass(frozen=True)
class Axis:
    """An axis from ``low`` to ``high`` with its (value, label) ticks."""

    low: float
    high: float
    ticks: tuple[tuple[float, str], ...]

    def scale(self, start: float, end: float) -> Callable[[float], float]:
        """Maps a value on this axis to a coordinate between ``start`` (at ``low``) and ``end``."""
        span = (self.high - self.low) or 1.0
        return lambda value: start + (value - self.low) / span * (end - start)


def value_axis(values: Sequence[float], bounds: tuple[float, float] | None = None) -> Axis:
    """A y axis for ``values`` (at least one), by the rules above; ``bounds``: the quantity's known range."""
    if bounds is not None:
        return ticked_axis(min(bounds[0], *values), max(bounds[1], *values))
    return ticked_axis(*_value_range(min(values), max(values)), whole=_all_whole(values))


def extent_axis(values: Sequence[float], bounds: tuple[float, float] | None = None) -> Axis:
    """An x axis over ``values`` (at least one): their extent or ``bounds``, a lone value centred."""
    if bounds is not None:
        return ticked_axis(min(bounds[0], *values), max(bounds[1], *values))
    return ticked_axis(min(values), max(values), whole=_all_whole(values))


def ticked_axis(low: float, high: float, whole: bool = False) -> Axis:
    """The axis widened to whole nice ticks covering ``low`` to ``high``."""
    if not high - low > RESOLUTION * max(1.0, abs(low), abs(high)):  # a lone value, or float noise
        low, high = _around(round((low + high) / 2, 12))
    step = _nice(_nice(high - low, rounded=False) / (TICKS - 1), rounded=True)
    if whole:
        step = max(step, 1.0)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    values = [round(k * step, decimals) + 0.0 for k in range(first, last + 1)]  # + 0.0: no -0.0
    return Axis(values[0], values[-1], tuple((v, f"{v:,.{decimals}f}") for v in values))


def _all_whole(values: Sequence[float]) -> bool:
    """Counts (steps) get whole ticks: no step 0.5; a bounded quantity never does (0, 0.2, ... 1)."""
    return all(float(value).is_integer() for value in values)


def _value_range(low: float, high: float) -> tuple[float, float]:
    if low == high:
        return _around(low)
    if low < 0 < high:
        return low, high  # a range across zero is at least as wide as its largest magnitude
    least_span = max(abs(low), abs(high)) * MIN_SPAN_SHARE
    if high - low >= least_span:
        return min(low, 0.0), max(high, 0.0)
    pad = (least_span - (high - low)) / 2
    return low - pad, high + pad


def _around(value: float) -> tuple[float, float]:
    return (value - abs(value), value + abs(value)) if value else (-1.0, 1.0)


def _nice(x: float, rounded: bool) -> float:
    """Heckbert's nice number near ``x``: 1, 2, 5 or 10 times a power of ten."""
    exponent = math.floor(math.log10(x))
    fraction = x / 10**exponent
    limits = ((1.5, 1), (3, 2), (7, 5)) if rounded else ((1, 1), (2, 2), (5, 5))
    nice = next((n for limit, n in limits if (fraction < limit if rounded else fraction <= limit)), 10)
    return nice * 10**exponent


def number_text(value: float) -> str:
    """A value in words for a text alternative: four significant digits, no exponent, never "-0"."""
    if round(value, 12) == 0:
        return "0"
    decimals = max(0, 3 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def text_width(text: str) -> float:
    """The width of ``text`` at the charts' font size, in px, on the wide side."""
    return FONT_SIZE * sum(_advance(char) for char in text)


def _advance(char: str) -> float:
    if char in _ADVANCES:
        return _ADVANCES[char]
    return UPPER_ADVANCE if char.isupper() else DEFAULT_ADVANCE


def shorten(text: str, width: float) -> str:
    """``text``, or as much of it as fits in ``width`` px followed by an ellipsis."""
    if text_width(text) <= width:
        return text
    kept = text
    while kept and text_width(kept.rstrip() + ELLIPSIS) > width:
        kept = kept[:-1]
    return kept.rstrip() + ELLIPSIS


def wrap(text: str, width: float, max_lines: int = 4) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` px; a word wider than a line, and the last
    line when the text needs more than ``max_lines``, end in an ellipsis (the page shows the text whole)."""
    lines: list[str] = []
    for word in text.split():
        joined = f"{lines[-1]} {word}" if lines else word
        if lines and text_width(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(shorten(word, width))
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], shorten(" ".join(lines[max_lines - 1 :]) + ELLIPSIS, width)]
    return lines
