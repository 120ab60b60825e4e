"""The server-drawn charts: axes from what the numbers mean, nice ticks without "-0", and text that fits
inside the chart (measured with the charts' own estimate, on the wide side of the fonts in use)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from annotation.feedback.results_plot import preference_chart, selective_chart
from core.charts import LINE, UNIT, extent_axis, text_width, ticked_axis, value_axis, wrap
from core.plot import ASCENT, Series, interval_chart, line_chart, timeline_series

ONE_STEP = [{"step": 1, "loss": 0.6931, "eval_loss": 0.7012, "eval_accuracy": 0.0}]
ZERO_TO_ONE = ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
LONG_SIDE = "run 12: SmolLM2-135M-Instruct best-of-4 on FreshWiki (round 3, retrained)"
NUMBERS = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


def parsed(svg: str) -> ET.Element:
    assert svg.startswith('<svg class="chart"') and "style" not in svg and "<script" not in svg
    return ET.fromstring(svg)  # noqa: S314 (our own output, not untrusted input)


def axes(svg: str) -> list[list[str]]:
    """Each axis's tick labels, in drawing order: x first, then the value axes (left, right)."""
    groups = parsed(svg).iter("g")
    return [[t.text or "" for t in g.findall("text") if t.text] for g in groups if g.get("class") == "axis"]


def axis_titles(svg: str) -> list[str]:
    """Each axis's title, its wrapped lines joined by spaces."""
    groups = [g for g in parsed(svg).iter("g") if g.get("class") == "axis"]
    return [
        " ".join(span.text or "" for span in t.iter("tspan"))
        for g in groups
        for t in g.iter("text")
        if t.find("tspan") is not None
    ]


def text_outside(svg: str) -> list[str]:
    """The lines of text that would reach past the chart's edges (none may)."""
    root = parsed(svg)
    width, height = (float(v) for v in root.get("viewBox", "").split()[2:])
    outside = []
    for text in root.iter("text"):
        lines = [span.text or "" for span in text.iter("tspan")] or [text.text or ""]
        x, y, anchor = float(text.get("x", 0)), float(text.get("y", 0)), text.get("text-anchor", "start")
        for i, line in enumerate(lines):
            length = text_width(line)
            start = {"start": 0.0, "middle": -length / 2, "end": -length}[anchor]
            if text.get("transform"):  # turned a quarter turn: reads upwards, later lines to the right
                along, across, room = (y - start - length, y - start), x + i * LINE, (height, width)
            else:
                along, across, room = (x + start, x + start + length), y + i * LINE, (width, height)
            if not (_within(*along, room[0]) and _within(across - ASCENT, across + 3, room[1])):
                outside.append(line)
    return outside


def _within(low: float, high: float, limit: float) -> bool:
    return low >= 0 and high <= limit


def point_heights(svg: str, label: str) -> list[float]:
    series = next(g for g in parsed(svg).iter("g") if g.findtext("title") == label)
    return [float(circle.get("cy", 0)) for circle in series.iter("circle")]


def test_a_one_step_run_draws_its_step_on_0_to_2_and_accuracy_on_0_to_1():
    x, loss, accuracy = axes(line_chart(timeline_series(ONE_STEP), "Run 1"))
    assert "-0" not in x + loss + accuracy
    assert x == ["0", "1", "2"]
    assert accuracy == ZERO_TO_ONE
    assert loss == ["0.60", "0.65", "0.70", "0.75", "0.80"]  # 0.69 and 0.70: at least a sixth of 0.7 wide


def test_accuracies_from_0_72_to_0_74_are_drawn_on_the_whole_0_to_1_axis():
    timeline = [{"step": step, "eval_accuracy": a} for step, a in ((10, 0.74), (20, 0.725), (30, 0.73))]
    svg = line_chart(timeline_series(timeline), "Run 2")
    x, accuracy = axes(svg)
    assert accuracy == ZERO_TO_ONE and x == ["10", "15", "20", "25", "30"]  # x spans the steps
    highest, lowest = (
        min(point_heights(svg, "validation accuracy")),
        max(point_heights(svg, "validation accuracy")),
    )
    assert lowest - highest <= 0.015 * 240 + 0.2  # a 1.5-point drop is 1.5% of the plot's height


def test_shares_on_the_results_and_proxy_charts_keep_their_whole_range():
    curve = {"label": "run 3", "points": [{"coverage": c, "rate": r} for c, r in ((0.4, 0.74), (0.6, 0.72))]}
    svg = selective_chart({"label": "supported and plausible", "short": "S&P", "curves": [curve]})
    assert axes(svg) == [ZERO_TO_ONE, ZERO_TO_ONE]
    preference = Series("run 3", [(0.0, 0.52), (1.0, 0.55)])
    svg = interval_chart(
        [preference],
        [[(0.0, 0.5, 0.56), (1.0, 0.53, 0.57)]],
        "p",
        "preference",
        "k",
        [(0.0, "1"), (1.0, "2")],
        y_bounds=UNIT,
    )
    assert axes(svg)[1] == ZERO_TO_ONE


def test_a_narrow_loss_band_never_fills_the_axis():
    svg = line_chart([Series("loss", [(1, 0.701), (2, 0.695), (3, 0.690)])], "Run 4")
    ticks = [float(t) for t in axes(svg)[1]]
    assert ticks[-1] - ticks[0] >= 0.701 / 6
    heights = point_heights(svg, "loss")
    assert max(heights) - min(heights) <= 240 * 0.011 / (0.701 / 6) + 0.2


def test_a_falling_loss_is_drawn_against_zero_and_a_long_run_has_plain_step_numbers():
    svg = line_chart([Series("loss", [(float(step), 2.0 / step) for step in range(1, 10_001)])], "Run 5")
    x, loss = axes(svg)
    assert loss[0] == "0.0" and x == ["0", "2,000", "4,000", "6,000", "8,000", "10,000"]  # not "1e+04"


def test_no_tick_reads_minus_zero():
    for axis in (
        ticked_axis(-0.5, 0.5),
        value_axis([-0.3, 0.1]),
        value_axis([0.0]),
        extent_axis([-1e-17, 0.3]),
    ):
        labels = [text for _, text in axis.ticks]
        assert any(float(label) == 0 for label in labels)  # zero is a tick, written "0", "0.0"...
        assert not any(label.startswith("-") and float(label) == 0 for label in labels)


@given(st.lists(NUMBERS, min_size=1, max_size=20), st.booleans())
def test_any_values_get_increasing_nice_ticks_that_cover_them(values, as_x):
    axis = extent_axis(values) if as_x else value_axis(values)
    ticks = [at for at, _ in axis.ticks]
    labels = [text for _, text in axis.ticks]
    assert 2 <= len(ticks) <= 12 and ticks == sorted(set(ticks)) and len(set(labels)) == len(labels)
    step = ticks[1] - ticks[0]
    assert axis.low <= min(values) + step * 1e-9 and max(values) - step * 1e-9 <= axis.high  # float noise
    assert not any(label.startswith("-") and float(label.replace(",", "")) == 0 for label in labels)
    leading = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(leading, nice, rel_tol=1e-6) for nice in (1, 2, 5, 10))


def test_a_long_axis_label_is_wrapped_whole_inside_the_results_chart():
    figures = [
        {"label": "Overall", "value": 0.375, "low": 0.125, "high": 0.625, "judgements": 1234},
        {"label": "Factual accuracy", "value": None},
    ]
    svg = preference_chart(figures, {"A": LONG_SIDE, "B": LONG_SIDE.replace("12", "13")})
    assert text_outside(svg) == []
    (title,) = axis_titles(svg)
    assert title == f"preference for A ({LONG_SIDE}) over B ({LONG_SIDE.replace('12', '13')})"
    assert axes(svg)[0] == ZERO_TO_ONE


def test_long_value_axis_titles_and_legends_are_wrapped_or_shortened_inside_the_chart():
    label = (
        "S&P rate of the answered, of the questions the reward model's best answer reached the threshold for"
    )
    curves = [
        {
            "label": f"{LONG_SIDE} {i}",
            "points": [{"coverage": 0.5, "rate": 0.7}, {"coverage": 1.0, "rate": 0.6}],
        }
        for i in range(4)
    ]
    svg = selective_chart({"label": "S&P", "short": label, "curves": curves})
    assert text_outside(svg) == []
    assert axis_titles(svg)[1] == f"{label} rate of the answered"
    svg = line_chart(timeline_series(ONE_STEP), "Run 1", left_label=label, right_label=label)
    assert text_outside(svg) == [] and axis_titles(svg)[1:] == [label, label]


def test_wrap_keeps_every_word_and_marks_what_it_had_to_cut():
    assert wrap("one two three", 1000) == ["one two three"]
    assert " ".join(wrap(LONG_SIDE, 200)) == LONG_SIDE
    assert all(text_width(line) <= 200 for line in wrap(LONG_SIDE, 200))
    cut = wrap("word " * 200, 100, max_lines=2)
    assert len(cut) == 2 and cut[-1].endswith("…")


def test_the_chart_describes_each_series_in_words():
    desc = parsed(line_chart(timeline_series(ONE_STEP), "Run 1")).findtext("desc")
    assert desc == (
        "training loss: 0.6931 at step 1; validation loss: 0.7012 at step 1; validation accuracy: 0 at step 1"
    )
    svg = interval_chart(
        [Series("run 3", [(0.0, 0.1), (2.0, 0.3)])],
        [[]],
        "p",
        "reward",
        "k, samples per question (log2 axis)",
        [(0.0, "1"), (1.0, "2"), (2.0, "4")],
    )
    assert (
        parsed(svg).findtext("desc")
        == "run 3: 0.1 at k, samples per question 1 to 0.3 at k, samples per question 4"
    )
