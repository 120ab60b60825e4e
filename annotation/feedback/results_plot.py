"""The charts of a batch's results page as inline SVG, drawn on the server like training.plot's (its palette
and line chart): attributes only, no script and no style attribute (the CSP forbids both), every label
escaped by ``format_html``. Each chart carries its numbers as text too, and the page has them in tables."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from training.plot import DASHED, PALETTE, Series, line_chart

WIDTH, LABELS, NUMBERS = 800, 270, 190  # the dimension labels on the left, the figures on the right
TOP, ROW, AXIS = 10, 26, 42
PREFERENCE_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_LABEL = 60  # characters of a side's label on the axis title (the page shows it whole)
MAX_LEGEND = 34  # characters of a run's label in a legend column of training.plot's line chart


def _scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    return lambda v: start + (v - low) / ((high - low) or 1.0) * (end - start)


def _at(coordinate: float) -> str:
    return f"{coordinate:.1f}"


def _join(parts: Sequence[SafeString]) -> SafeString:
    return format_html_join("", "{}", ((part,) for part in parts))


def _shorten(text: str, most: int = MAX_LABEL) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def figure_text(figure: Mapping[str, Any]) -> str:
    """The figure in words: its value (interval), n = its judgements; or "no judgements"."""
    if figure.get("value") is None:
        return "no judgements"
    return f"{figure['value']:.3f} ({figure['low']:.3f} to {figure['high']:.3f}), n = {figure['judgements']}"


def preference_chart(figures: Sequence[Mapping[str, Any]], sides: Mapping[str, str]) -> SafeString:
    """One row per dimension: the preference for A as a dot, its 95% interval as a whisker, a dashed line
    at 0.5 (no preference) and the figure in words on the right. Empty when nothing was judged."""
    if not any(figure.get("value") is not None for figure in figures):
        return SafeString()
    right = WIDTH - NUMBERS
    x = _scale(0.0, 1.0, LABELS, right)
    bottom = TOP + ROW * len(figures)
    height = bottom + AXIS
    grid = format_html_join(
        "",
        '<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>'
        '<text x="{0}" y="{3}" text-anchor="middle">{4}</text>',
        ((_at(x(t)), TOP, bottom, bottom + 16, f"{t:g}") for t in PREFERENCE_TICKS),
    )
    title = f"Preference for A ({sides['A']}) over B ({sides['B']}) by dimension, with 95% intervals"
    axis = format_html(
        '<g class="axis"><line x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>{3}'
        '<text x="{4}" y="{5}" text-anchor="middle">preference for A ({6}) over B ({7})</text></g>',
        LABELS,
        right,
        bottom,
        grid,
        _at((LABELS + right) / 2),
        bottom + 34,
        _shorten(sides["A"]),
        _shorten(sides["B"]),
    )
    even = format_html(
        '<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="{3}" stroke-width="1.5" stroke-dasharray="{4}">'
        "<title>0.5: no preference</title></line>",
        _at(x(0.5)),
        TOP,
        bottom,
        PALETTE[6],
        DASHED,
    )
    rows = [_preference_row(figure, TOP + ROW * i + ROW / 2, x) for i, figure in enumerate(figures)]
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title>{}{}{}</svg>',
        WIDTH,
        height,
        title,
        title,
        axis,
        even,
        _join(rows),
    )


def _preference_row(figure: Mapping[str, Any], y: float, x: Callable[[float], float]) -> SafeString:
    label = format_html(
        '<text x="{}" y="{}" text-anchor="end">{}</text>', LABELS - 8, _at(y + 4), figure["label"]
    )
    words = format_html('<text x="{}" y="{}">{}</text>', WIDTH - NUMBERS + 8, _at(y + 4), figure_text(figure))
    if figure.get("value") is None:
        return _join([label, words])
    low, high, value = x(figure["low"]), x(figure["high"]), x(figure["value"])
    mark = format_html(
        '<g class="series" stroke="{0}" fill="{0}"><title>{1}: {2}</title>'
        '<line x1="{3}" x2="{4}" y1="{5}" y2="{5}" stroke-width="2"/>'
        '<line x1="{3}" x2="{3}" y1="{6}" y2="{7}" stroke-width="2"/>'
        '<line x1="{4}" x2="{4}" y1="{6}" y2="{7}" stroke-width="2"/>'
        '<circle cx="{8}" cy="{5}" r="4"/></g>',
        PALETTE[0],
        figure["label"],
        figure_text(figure),
        _at(low),
        _at(high),
        _at(y),
        _at(y - 5),
        _at(y + 5),
        _at(value),
    )
    return _join([label, mark, words])


def selective_chart(prediction: Mapping[str, Any]) -> SafeString:
    """GopherCite's selective prediction: the rate of the answered questions against coverage, one point
    per reward threshold (coverage falls as the threshold rises), a line per sampling run."""
    series = [
        Series(
            _shorten(curve["label"], MAX_LEGEND),
            sorted((p["coverage"], p["rate"]) for p in curve["points"] if p["rate"] is not None),
            colour,
        )
        for colour, curve in enumerate(prediction["curves"])
    ]
    return line_chart(
        series,
        f"Selective prediction: {prediction['label']} against coverage as the reward threshold rises",
        left_label=f"{prediction['short']} rate of the answered",
        x_label="coverage (share of questions answered)",
    )
