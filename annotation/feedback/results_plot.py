"""The charts of a batch's results page as inline SVG, drawn on the server like core.plot's (its
palette, line chart and text lines; why by hand and not by a plotting library: core.plot's
docstring): attributes only, no script and no style attribute (the CSP forbids both), every label escaped
by ``format_html``. Preferences and rates are on their whole 0 to 1 range; text is measured
(``core.charts``) so that it fits, wrapped or shortened, never cut by the chart's edge. Each chart
carries its numbers as text too, and the page has them in tables."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.charts import LINE, UNIT, Axis, shorten, text_width, value_axis, wrap
from core.plot import DASHED, PALETTE, Series, line_chart, text_lines

WIDTH, TOP, ROW, PAD, GAP = 800, 10, 26, 8, 8  # GAP: between the plot and the text beside it
MIN_PLOT = 300  # px at least for the 0 to 1 axis; the dimension labels give way (shortened) before it
MAX_LABEL = 100  # characters of a side's label on the axis title (the page shows it whole): 3 lines at most


def _at(coordinate: float) -> str:
    return f"{coordinate:.1f}"


def _join(parts: Sequence[SafeString]) -> SafeString:
    return format_html_join("", "{}", ((part,) for part in parts))


def _cut(text: str, most: int = MAX_LABEL) -> str:
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
    numbers = max(text_width(figure_text(figure)) for figure in figures) + GAP + PAD
    labels = min(max(text_width(str(figure["label"])) for figure in figures), WIDTH - numbers - MIN_PLOT)
    left, right = PAD + labels + GAP, WIDTH - numbers
    axis = value_axis(UNIT, UNIT)
    x = axis.scale(left, right)
    bottom = TOP + ROW * len(figures)
    title = f"Preference for A ({sides['A']}) over B ({sides['B']}) by dimension, with 95% intervals"
    # The axis title is centred under the plot and wrapped to what fits on both sides of that centre.
    centre = (left + right) / 2
    words = f"preference for A ({_cut(sides['A'])}) over B ({_cut(sides['B'])})"
    axis_title = wrap(words, 2 * min(centre, WIDTH - centre) - 2 * PAD)
    even = format_html(
        '<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="{3}" stroke-width="1.5" stroke-dasharray="{4}">'
        "<title>0.5: no preference</title></line>",
        _at(x(0.5)),
        TOP,
        bottom,
        PALETTE[6],
        DASHED,
    )
    rows = [
        _preference_row(figure, TOP + ROW * i + ROW / 2, x, labels, left) for i, figure in enumerate(figures)
    ]
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title>{}{}{}</svg>',
        WIDTH,
        bottom + 34 + LINE * (len(axis_title) - 1) + PAD,
        title,
        title,
        _preference_axis(axis, x, bottom, axis_title),
        even,
        _join(rows),
    )


def _preference_axis(axis: Axis, x: Callable[[float], float], bottom: float, title: list[str]) -> SafeString:
    left, right = x(axis.low), x(axis.high)
    grid = format_html_join(
        "",
        '<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>'
        '<text x="{0}" y="{3}" text-anchor="middle">{4}</text>',
        ((_at(x(at)), TOP, bottom, bottom + 16, text) for at, text in axis.ticks),
    )
    return format_html(
        '<g class="axis"><line x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>{3}{4}</g>',
        _at(left),
        _at(right),
        bottom,
        grid,
        text_lines((left + right) / 2, bottom + 34, title),
    )


def _preference_row(
    figure: Mapping[str, Any], y: float, x: Callable[[float], float], room: float, left: float
) -> SafeString:
    label = format_html(
        '<text x="{}" y="{}" text-anchor="end"><title>{}</title>{}</text>',
        _at(left - GAP),
        _at(y + 4),
        figure["label"],
        shorten(str(figure["label"]), room),
    )
    words = format_html('<text x="{}" y="{}">{}</text>', _at(x(1.0) + GAP), _at(y + 4), figure_text(figure))
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
    per reward threshold (coverage falls as the threshold rises), a line per sampling run; both shares on
    their whole 0 to 1 range. The legend shortens a label that would not fit (the page lists them whole)."""
    series = [
        Series(
            curve["label"],
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
        left_bounds=UNIT,
        x_bounds=UNIT,
    )
