"""Line charts as inline SVG, drawn on the server: no chart library and no script, only SVG attributes (the
CSP refuses style attributes and <style> elements in the page), every label escaped. Losses use the left axis,
accuracies the right one (0 to 1), so that a loss near 2 and an accuracy near 0.6 share one chart. Axis
ranges, ticks and text fitting: ``core.charts``.

Why drawn by hand and not by a plotting library (weighed for issue 24, measured on the 2-core dev machine):
- matplotlib 3.11 (server-side SVG): about 80 MB more to install (itself 35 MB, fontTools 30 MB, Pillow 7 MB,
  kiwisolver 5 MB), 0.18 to 0.3 s to import into the web process, 18 ms a chart; its SVG writes colours and
  fonts as style attributes plus a <style> element (32 style attributes on a one-point chart), which the CSP
  refuses inline, so it would need rewriting or an <img> request per chart (no text for a screen reader, and
  the run page re-renders every 2 s). Its automatic limits put a lone point at 0 on -0.04..0.04 too: the axis
  rules would have to be written anyway.
- A vendored client-side library (uPlot 51 kB, Chart.js 210 kB minified): canvas drawing from JSON, i.e. a
  script, a data endpoint and no text in the page for each chart, on pages that need no other script.
What the charts need is small and fully tested here: lines, markers, interval bars, legends, and axes that
follow the data's meaning (``core.charts``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.charts import (
    LINE,
    UNIT,
    Axis,
    extent_axis,
    number_text,
    shorten,
    text_width,
    value_axis,
    wrap,
)

# Okabe-Ito colours: told apart with the common colour-vision deficiencies.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#8c564b")
DASHED, DOTTED = "6 4", "2 3"
MAX_POINTS = 400  # per series: a 10,000-step run polled every 2 s must not send 10,000 points each time
MARKERS_UP_TO = 40  # sparse series (validations) get a dot per point, so that one point still shows
WIDTH, PLOT_HEIGHT, TOP = 720, 240, 10
MIN_SIDE = 60  # px at least beside the plot on either side (room for a tick label centred on its edge)
PAD, TICK_GAP, ASCENT = 8, 6, 9  # ASCENT: a line's glyphs above its baseline
LEGEND_ROW, SWATCH, ENTRY_GAP = 18, 30, 18  # SWATCH: a legend entry's line and the gap before its text

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


@dataclass(frozen=True)
class Side:
    """A value axis with its title's wrapped lines, left or right of the plot."""

    axis: Axis
    title: list[str]
    on_right: bool

    @property
    def width(self) -> float:
        """The room it takes beside the plot: title lines, then tick labels."""
        labels = max(text_width(text) for _, text in self.axis.ticks)
        return PAD + LINE * len(self.title) + PAD + labels + TICK_GAP


@dataclass(frozen=True)
class Frame:
    """Where the plot lies in the chart, in the chart's coordinates."""

    left: float
    right: float
    top: float = TOP
    bottom: float = TOP + PLOT_HEIGHT


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


def line_chart(
    series: Sequence[Series],
    title: str,
    left_label: str = "loss",
    right_label: str = "accuracy",
    x_label: str = "step",
    *,
    left_bounds: tuple[float, float] | None = None,
    right_bounds: tuple[float, float] | None = UNIT,
    x_bounds: tuple[float, float] | None = None,
) -> SafeString:
    """The chart as an ``<svg>`` element, or an empty string when no series has a point. ``*_bounds``: the
    known range of an axis's quantity (accuracy, a share: ``UNIT``), drawn whole; None: from the data."""
    series = [s for s in series if s.points]
    if not series:
        return SafeString()
    x_axis = extent_axis([x for s in series for x, _ in s.points], x_bounds)
    left = _side([s for s in series if not s.right_axis], left_bounds, left_label, False)
    right = _side([s for s in series if s.right_axis], right_bounds, right_label, True)
    frame = _frame(left, right)
    x = x_axis.scale(frame.left, frame.right)
    parts = [_x_axis(x_axis, frame, x, x_label)]
    for side in (left, right):
        if side:  # grid lines for one axis only: two misaligned sets would be noise
            parts.append(_y_axis(side, frame, grid=not (side.on_right and left)))
    scales = {side.on_right: side.axis.scale(frame.bottom, frame.top) for side in (left, right) if side}
    parts += [_line(s, x, scales[s.right_axis]) for s in series]
    return _svg(title, frame, x_label, x_axis, parts, series)


def _side(
    series: Sequence[Series], bounds: tuple[float, float] | None, label: str, on_right: bool
) -> Side | None:
    values = [y for s in series for _, y in s.points]
    return Side(value_axis(values, bounds), wrap(label, PLOT_HEIGHT), on_right) if values else None


def _frame(left: Side | None, right: Side | None) -> Frame:
    return Frame(max(MIN_SIDE, left.width if left else 0), WIDTH - max(MIN_SIDE, right.width if right else 0))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at(coordinate: float) -> str:
    return f"{coordinate:.1f}"


def text_lines(
    x: float, y: float, lines: Sequence[str], anchor: str = "middle", rotate: bool = False
) -> SafeString:
    """A ``<text>`` of one or more lines, the first line's baseline at (x, y), the others below it (to the
    right of it when ``rotate``d a quarter turn to read upwards, as a y axis title)."""
    turned = format_html(' transform="rotate(-90 {} {})"', _at(x), _at(y)) if rotate else ""
    spans = format_html_join(
        "",
        '<tspan x="{}" dy="{}">{}</tspan>',
        ((_at(x), LINE if i else 0, line) for i, line in enumerate(lines)),
    )
    return format_html(
        '<text x="{}" y="{}" text-anchor="{}"{}>{}</text>', _at(x), _at(y), anchor, turned, spans
    )


def _x_axis(axis: Axis, frame: Frame, x: Callable[[float], float], label: str) -> SafeString:
    """The x axis with a grid line and a label at each tick, its title wrapped to the plot's width."""
    labels = format_html_join(
        "",
        '<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>'
        '<text x="{0}" y="{3}" text-anchor="middle">{4}</text>',
        ((_at(x(at)), frame.top, frame.bottom, frame.bottom + 16, text) for at, text in axis.ticks),
    )
    title = text_lines((frame.left + frame.right) / 2, frame.bottom + 32, _x_title(frame, label))
    return format_html(
        '<g class="axis"><line x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>{3}{4}</g>',
        _at(frame.left),
        _at(frame.right),
        frame.bottom,
        labels,
        title,
    )


def _x_title(frame: Frame, label: str) -> list[str]:
    return wrap(label, frame.right - frame.left)


def _y_axis(side: Side, frame: Frame, grid: bool) -> SafeString:
    y = side.axis.scale(frame.bottom, frame.top)
    edge = frame.right if side.on_right else frame.left
    text_x, anchor = (edge + TICK_GAP, "start") if side.on_right else (edge - TICK_GAP, "end")
    # Grid lines across the plot, or only short ticks on the axis.
    line = (_at(frame.left), _at(frame.right), "grid") if grid else (_at(edge - 4), _at(edge + 4), "tick")
    labels = format_html_join(
        "",
        '<line class="{2}" x1="{0}" x2="{1}" y1="{3}" y2="{3}"/>'
        '<text x="{4}" y="{5}" text-anchor="{6}">{7}</text>',
        ((*line, _at(y(at)), _at(text_x), _at(y(at) + 4), anchor, text) for at, text in side.axis.ticks),
    )
    # The title's band: at the chart's left edge, or after the right axis's tick labels.
    band = edge + side.width - LINE * len(side.title) - PAD if side.on_right else PAD
    title = text_lines(band + ASCENT, (frame.top + frame.bottom) / 2, side.title, rotate=True)
    return format_html(
        '<g class="axis"><line x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>{3}{4}</g>',
        _at(edge),
        frame.top,
        frame.bottom,
        labels,
        title,
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


def _legend_entries(series: Sequence[Series], left: float) -> list[tuple[float, int, str, Series]]:
    """(x, row, text, series) of each entry, flowed left to right and onto the next row when the row is full;
    a label wider than a whole row is shortened (the series' own <title> and the page keep it whole)."""
    entries, x, row = [], left, 0
    for s in series:
        text = shorten(s.label, WIDTH - PAD - left - SWATCH)
        width = SWATCH + text_width(text)
        if x > left and x + width > WIDTH - PAD:
            x, row = left, row + 1
        entries.append((x, row, text, s))
        x += width + ENTRY_GAP
    return entries


def _legend(entries: Sequence[tuple[float, int, str, Series]], top: float) -> SafeString:
    drawn = []
    for left, row, text, s in entries:
        y = top + row * LEGEND_ROW
        dash = format_html(' stroke-dasharray="{}"', s.dash) if s.dash else ""
        drawn.append(
            format_html(
                '<line x1="{0}" x2="{1}" y1="{2}" y2="{2}" stroke="{3}" stroke-width="2"{4}/>'
                '<text x="{5}" y="{6}">{7}</text>',
                _at(left),
                _at(left + SWATCH - 6),
                _at(y - 4),
                PALETTE[s.colour % len(PALETTE)],
                dash,
                _at(left + SWATCH),
                _at(y),
                text,
            )
        )
    return format_html('<g class="legend">{}</g>', _join(drawn))


def _svg(
    title: str, frame: Frame, x_label: str, x_axis: Axis, parts: list[SafeString], series: Sequence[Series]
) -> SafeString:
    """The chart's element: the plot, the legend's rows below the x axis's title, a text alternative."""
    legend_top = frame.bottom + 32 + LINE * (len(_x_title(frame, x_label)) - 1) + PAD + LEGEND_ROW
    entries = _legend_entries(series, frame.left)
    height = legend_top + LEGEND_ROW * max(row for _, row, _, _ in entries) + PAD
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title><desc>{}</desc>'
        "{}{}</svg>",
        WIDTH,
        _at(height),
        title,
        title,
        _description(series, x_label, x_axis),
        _join(parts),
        _legend(entries, legend_top),
    )


def _description(series: Sequence[Series], x_label: str, x_axis: Axis) -> str:
    """Each series' first and last point in words: the chart's gist for whoever cannot see it."""
    named = dict(x_axis.ticks)  # a caller's tick text (k = 4 at log2 k = 2), else the number
    x_name = x_label.split(" (")[0]

    def at(point: tuple[float, float]) -> str:
        return f"{number_text(point[1])} at {x_name} {named.get(point[0]) or number_text(point[0])}"

    return "; ".join(
        f"{s.label}: {at(s.points[0])}" + (f" to {at(s.points[-1])}" if len(s.points) > 1 else "")
        for s in series
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
    *,
    y_bounds: tuple[float, float] | None = None,
) -> SafeString:
    """A line chart whose points carry a vertical bar for their interval: ``intervals[i]`` holds
    (x, low, high) for ``series[i]``, drawn in its colour, on one value axis (``y_bounds``: its quantity's
    known range). The caller places and labels the x ticks (a log2 axis labelled 1, 2, 4...). Series that
    share an x are nudged apart, so that one's bar does not hide another's. Empty when no series has a
    point."""
    drawn = [(s, bars) for s, bars in zip(series, intervals, strict=True) if s.points]
    if not drawn:
        return SafeString()
    xs = [x for x, _ in x_ticks] + [x for s, _ in drawn for x, _ in s.points]
    low_x, high_x = min(xs), max(xs)
    if high_x == low_x:
        low_x, high_x = low_x - 0.5, high_x + 0.5
    x_axis = Axis(low_x, high_x, tuple(x_ticks))
    values = [y for s, _ in drawn for _, y in s.points]
    values += [v for _, bars in drawn for _, low, high in bars for v in (low, high)]
    side = Side(value_axis(values, y_bounds), wrap(y_label, PLOT_HEIGHT), on_right=False)
    frame = _frame(side, None)
    pad = NUDGE * len(drawn)  # the outermost bars stay inside the axes
    x = x_axis.scale(frame.left + pad, frame.right - pad)
    y = side.axis.scale(frame.bottom, frame.top)
    parts = [_x_axis(x_axis, frame, x, x_label), _y_axis(side, frame, grid=True)]
    for i, (s, bars) in enumerate(drawn):
        offset = (i - (len(drawn) - 1) / 2) * NUDGE
        nudged = _shifted(x, offset)
        parts.append(_bars(s, bars, nudged, y))
        parts.append(_line(s, nudged, y))
    return _svg(title, frame, x_label, x_axis, parts, [s for s, _ in drawn])


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
