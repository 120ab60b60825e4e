"""Line charts of training metrics as inline SVG, drawn on the server: no chart library and no script, only
SVG attributes (the CSP forbids style attributes), every label escaped. Losses use the left axis, accuracies
the right one, so that a loss near 2 and an accuracy near 0.6 share one chart without flattening either."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

# Okabe-Ito colours: told apart with the common colour-vision deficiencies.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#8c564b")
DASHED, DOTTED = "6 4", "2 3"
MAX_POINTS = 400  # per series: a 10,000-step run polled every 2 s must not send 10,000 points each time
MARKERS_UP_TO = 40  # sparse series (validations) get a dot per point, so that one point still shows
WIDTH, PLOT_HEIGHT, LEGEND_ROW = 720, 240, 18
LEFT, RIGHT, TOP, BOTTOM = 60, 60, 10, 36
LEGEND_COLUMNS = max(1, WIDTH // 240)


# What a run's timeline is drawn as: logged key, legend text, dash, whether on the accuracy axis.
CURVES = (
    ("loss", "training loss", "", False),
    ("eval_loss", "validation loss", DASHED, False),
    ("eval_accuracy", "validation accuracy", DOTTED, True),
)


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (step, value), steps increasing
    colour: int = 0  # index into PALETTE
    dash: str = ""  # stroke-dasharray; "" draws a solid line
    right_axis: bool = False


def timeline_points(timeline: Iterable[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(step, value) for each logged entry that has a finite ``key``."""
    points = []
    for entry in timeline:
        value, step = entry.get(key), entry.get("step")
        if _is_number(value) and _is_number(step) and math.isfinite(value):
            points.append((float(step), float(value)))
    return points


def timeline_series(
    timeline: Sequence[dict[str, Any]], prefix: str = "", colour: int | None = None
) -> list[Series]:
    """The curves of one run; each in its own colour, or all in ``colour`` (runs told apart by colour)."""
    return [
        Series(
            f"{prefix}{label}", timeline_points(timeline, key), i if colour is None else colour, dash, right
        )
        for i, (key, label, dash, right) in enumerate(CURVES)
    ]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [low, high]."""
    if not high > low:
        low, high = low - (abs(low) * 0.1 or 0.5), high + (abs(high) * 0.1 or 0.5)
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks, value = [], first
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


def line_chart(
    series: Sequence[Series],
    title: str,
    left_label: str = "loss",
    right_label: str = "accuracy",
    x_label: str = "step",
) -> SafeString:
    """The chart as an ``<svg>`` element, or an empty string when no series has a point."""
    series = [s for s in series if s.points]
    if not series:
        return SafeString()
    steps = [x for s in series for x, _ in s.points]
    x_ticks = nice_ticks(min(steps), max(steps))
    left_ticks = _value_ticks([s for s in series if not s.right_axis])
    right_ticks = _value_ticks([s for s in series if s.right_axis])
    x = _scale(x_ticks[0], x_ticks[-1], LEFT, WIDTH - RIGHT)

    parts = [_x_axis([(t, _number(t)) for t in x_ticks], x, x_label)]
    for ticks, on_right, label in ((left_ticks, False, left_label), (right_ticks, True, right_label)):
        if ticks:  # grid lines for one axis only: two misaligned sets would be noise
            parts.append(_y_axis(ticks, on_right, label, grid=not (on_right and left_ticks)))
    for s in series:
        ticks = right_ticks if s.right_axis else left_ticks
        parts.append(_line(s, x, _scale(ticks[0], ticks[-1], TOP + PLOT_HEIGHT, TOP)))
    parts.append(_legend(series))
    return _svg(title, parts, len(series))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value_ticks(series: Sequence[Series]) -> list[float]:
    values = [y for s in series for _, y in s.points]
    return nice_ticks(min(values), max(values)) if values else []


def _scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    span = (high - low) or 1.0
    return lambda v: start + (v - low) / span * (end - start)


def _number(value: float) -> str:
    return f"{value:.4g}"


def _at(coordinate: float) -> str:
    return f"{coordinate:.1f}"


def _x_axis(ticks: Sequence[tuple[float, str]], x: Callable[[float], float], label: str) -> SafeString:
    """The x axis with a grid line and a label at each (x, text) tick."""
    baseline = TOP + PLOT_HEIGHT
    labels = format_html_join(
        "",
        '<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>'
        '<text x="{0}" y="{3}" text-anchor="middle">{4}</text>',
        ((_at(x(at)), TOP, baseline, baseline + 16, text) for at, text in ticks),
    )
    return format_html(
        '<g class="axis"><line x1="{}" x2="{}" y1="{}" y2="{}"/>{}'
        '<text x="{}" y="{}" text-anchor="middle">{}</text></g>',
        LEFT,
        WIDTH - RIGHT,
        baseline,
        baseline,
        labels,
        (LEFT + WIDTH - RIGHT) // 2,
        baseline + 32,
        label,
    )


def _y_axis(ticks: list[float], on_right: bool, label: str, grid: bool) -> SafeString:
    y = _scale(ticks[0], ticks[-1], TOP + PLOT_HEIGHT, TOP)
    edge = WIDTH - RIGHT if on_right else LEFT
    text_x, anchor = (edge + 6, "start") if on_right else (edge - 6, "end")
    # Grid lines across the plot, or only short ticks on the axis.
    line = (LEFT, WIDTH - RIGHT, "grid") if grid else (edge - 4, edge + 4, "tick")
    labels = format_html_join(
        "",
        '<line class="{2}" x1="{0}" x2="{1}" y1="{3}" y2="{3}"/>'
        '<text x="{4}" y="{5}" text-anchor="{6}">{7}</text>',
        ((*line, _at(y(t)), text_x, _at(y(t) + 4), anchor, _number(t)) for t in ticks),
    )
    title_x = WIDTH - 12 if on_right else 14
    return format_html(
        '<g class="axis"><line x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>{3}'
        '<text x="{4}" y="{5}" text-anchor="middle" transform="rotate(-90 {4} {5})">{6}</text></g>',
        edge,
        TOP,
        TOP + PLOT_HEIGHT,
        labels,
        title_x,
        TOP + PLOT_HEIGHT // 2,
        label,
    )


def _line(s: Series, x: Callable[[float], float], y: Callable[[float], float]) -> SafeString:
    points = _thin(s.points)
    path = " ".join(f"{'L' if i else 'M'}{_at(x(px))},{_at(y(py))}" for i, (px, py) in enumerate(points))
    colour = PALETTE[s.colour % len(PALETTE)]
    dash = format_html(' stroke-dasharray="{}"', s.dash) if s.dash else ""
    markers = ""
    if len(points) <= MARKERS_UP_TO:
        markers = format_html_join(
            "", '<circle cx="{}" cy="{}" r="2.5"/>', ((_at(x(px)), _at(y(py))) for px, py in points)
        )
    return format_html(
        '<g class="series" stroke="{0}" fill="{0}"><title>{1}</title>'
        '<path d="{2}" fill="none" stroke-width="2"{3}/>{4}</g>',
        colour,
        s.label,
        path,
        dash,
        markers,
    )


def _thin(points: Sequence[tuple[float, float]]) -> Sequence[tuple[float, float]]:
    """At most about MAX_POINTS evenly spaced points, always keeping the last one (the newest value)."""
    if len(points) <= MAX_POINTS:
        return points
    stride = math.ceil(len(points) / MAX_POINTS)
    kept = list(points[::stride])
    return kept if kept[-1] == points[-1] else [*kept, points[-1]]


def _legend(series: Sequence[Series]) -> SafeString:
    top = TOP + PLOT_HEIGHT + BOTTOM + 12
    column_width = (WIDTH - LEFT) // LEGEND_COLUMNS
    entries = []
    for i, s in enumerate(series):
        left, y = LEFT + (i % LEGEND_COLUMNS) * column_width, top + (i // LEGEND_COLUMNS) * LEGEND_ROW
        dash = format_html(' stroke-dasharray="{}"', s.dash) if s.dash else ""
        entries.append(
            format_html(
                '<line x1="{0}" x2="{1}" y1="{2}" y2="{2}" stroke="{3}" stroke-width="2"{4}/>'
                '<text x="{5}" y="{6}">{7}</text>',
                left,
                left + 24,
                y - 4,
                PALETTE[s.colour % len(PALETTE)],
                dash,
                left + 30,
                y,
                s.label,
            )
        )
    return format_html('<g class="legend">{}</g>', _join(entries))


def _svg(title: str, parts: Iterable[SafeString], legend_entries: int) -> SafeString:
    """The chart's element: the plot, then as many legend rows as its entries take."""
    height = TOP + PLOT_HEIGHT + BOTTOM + LEGEND_ROW * math.ceil(legend_entries / LEGEND_COLUMNS)
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title>{}</svg>',
        WIDTH,
        height,
        title,
        title,
        _join(parts),
    )


def _join(parts: Iterable[SafeString]) -> SafeString:
    return format_html_join("", "{}", ((part,) for part in parts))


NUDGE = 4  # pixels between the interval bars of series that share an x


def interval_chart(
    series: Sequence[Series],
    intervals: Sequence[Sequence[tuple[float, float, float]]],
    title: str,
    y_label: str,
    x_label: str,
    x_ticks: Sequence[tuple[float, str]],
) -> SafeString:
    """A line chart whose points carry a vertical bar for their interval: ``intervals[i]`` holds
    (x, low, high) for ``series[i]``, drawn in its colour, on one value axis. The caller places and
    labels the x ticks (a log2 axis labelled 1, 2, 4...). Series that share an x are nudged apart, so
    that one's bar does not hide another's. An empty string when no series has a point."""
    drawn = [(s, bars) for s, bars in zip(series, intervals, strict=True) if s.points]
    if not drawn:
        return SafeString()
    xs = [x for x, _ in x_ticks] + [x for s, _ in drawn for x, _ in s.points]
    low_x, high_x = min(xs), max(xs)
    if high_x == low_x:
        low_x, high_x = low_x - 0.5, high_x + 0.5
    values = [y for s, _ in drawn for _, y in s.points]
    values += [v for _, bars in drawn for _, low, high in bars for v in (low, high)]
    y_ticks = nice_ticks(min(values), max(values))
    pad = NUDGE * len(drawn)  # the outermost bars stay inside the axes
    x = _scale(low_x, high_x, LEFT + pad, WIDTH - RIGHT - pad)
    y = _scale(y_ticks[0], y_ticks[-1], TOP + PLOT_HEIGHT, TOP)
    parts = [_x_axis(x_ticks, x, x_label), _y_axis(y_ticks, False, y_label, grid=True)]
    for i, (s, bars) in enumerate(drawn):
        offset = (i - (len(drawn) - 1) / 2) * NUDGE
        nudged = _shifted(x, offset)
        parts.append(_bars(s, bars, nudged, y))
        parts.append(_line(s, nudged, y))
    parts.append(_legend([s for s, _ in drawn]))
    return _svg(title, parts, len(drawn))


def _shifted(x: Callable[[float], float], offset: float) -> Callable[[float], float]:
    return lambda v: x(v) + offset


def _bars(
    s: Series,
    bars: Sequence[tuple[float, float, float]],
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> SafeString:
    """A vertical bar from low to high at each x, with short caps."""
    lines = format_html_join(
        "",
        '<line x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>'
        '<line x1="{3}" x2="{4}" y1="{1}" y2="{1}"/><line x1="{3}" x2="{4}" y1="{2}" y2="{2}"/>',
        ((_at(x(at)), _at(y(low)), _at(y(high)), _at(x(at) - 3), _at(x(at) + 3)) for at, low, high in bars),
    )
    return format_html(
        '<g class="interval" stroke="{}" stroke-width="1.5"><title>{}: 95% interval</title>{}</g>',
        PALETTE[s.colour % len(PALETTE)],
        s.label,
        lines,
    )
