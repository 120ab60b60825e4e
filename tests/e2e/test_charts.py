"""The charts in Chromium with the site's stylesheet: every piece of text, as the browser lays it out in its
font, lies inside its chart (tests/test_charts.py checks the same with the charts' own width estimate)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser

from annotation.feedback.results_plot import preference_chart, selective_chart
from core.plot import line_chart, timeline_series

pytestmark = pytest.mark.e2e

CSS = Path(__file__).resolve().parents[2] / "webgpt_site" / "static" / "css" / "site.css"
LONG_SIDE = "run 12: SmolLM2-135M-Instruct best-of-4 on FreshWiki (round 3, retrained)"
LONG_LABEL = "S&P rate of the answered, of the questions whose best answer reached the reward threshold"

# For each text element: how far it reaches past its chart's viewBox on any side, in the chart's units.
OVERFLOW = """() => [...document.querySelectorAll("svg.chart text")].map(text => {
    const svg = text.ownerSVGElement, box = text.getBBox(), view = svg.viewBox.baseVal;
    const toChart = svg.getScreenCTM().inverse().multiply(text.getScreenCTM());
    const corners = [[box.x, box.y], [box.x + box.width, box.y + box.height]].map(([x, y]) =>
        new DOMPoint(x, y).matrixTransform(toChart));
    const xs = corners.map(c => c.x), ys = corners.map(c => c.y);
    const past = Math.max(view.x - Math.min(...xs), Math.max(...xs) - view.x - view.width,
                          view.y - Math.min(...ys), Math.max(...ys) - view.y - view.height);
    return [text.textContent, past];
})"""


def charts() -> list[str]:
    one_step = [{"step": 1, "loss": 0.6931, "eval_loss": 0.7012, "eval_accuracy": 0.0}]
    figures = [
        {"label": "Overall", "value": 0.375, "low": 0.125, "high": 0.625, "judgements": 1234},
        {"label": "Factual accuracy", "value": None},
    ]
    curves = [
        {
            "label": f"{LONG_SIDE} {i}",
            "points": [{"coverage": 0.5, "rate": 0.7}, {"coverage": 1.0, "rate": 0.6}],
        }
        for i in range(3)
    ]
    return [
        line_chart(timeline_series(one_step), "Run 1", left_label=LONG_LABEL, right_label=LONG_LABEL),
        preference_chart(figures, {"A": LONG_SIDE, "B": LONG_SIDE.replace("12", "13")}),
        selective_chart({"label": "S&P", "short": LONG_LABEL, "curves": curves}),
    ]


def test_no_chart_text_reaches_past_its_chart_in_the_browser(browser: Browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content(f"<style>{CSS.read_text()}</style>" + "".join(f"<div>{svg}</div>" for svg in charts()))
    reach = page.evaluate(OVERFLOW)
    page.close()
    assert len(reach) > 30
    assert [(text, past) for text, past in reach if past > 0.5] == []
