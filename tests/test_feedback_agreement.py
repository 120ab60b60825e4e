"""Labeler agreement, gold accuracy and preference rates on small hand-computed examples (no database)."""

from __future__ import annotations

import pytest

from annotation.feedback.agreement import (
    comparison_agreement,
    gold_accuracy,
    preference_agreement,
    preference_rate,
    ranking_agreement,
    ranking_pair_agreement,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("x", "y", "score"),
    [(1, 0.5, 1), (-0.5, -1, 1), (0, 0, 1), (0, -1, 0.5), (0.5, 0, 0.5), (1, -0.5, 0), (1e-12, 0, 1)],
)
def test_preference_agreement(x, y, score):
    assert preference_agreement(x, y) == score


def test_comparison_agreement():
    labels = {
        "q1": {"ann": 1.0, "bob": 0.5, "cat": -0.5},  # ann: (1 + 0) / 2; bob: (1 + 0) / 2; cat: 0
        "q2": {"ann": 0.0, "bob": -1.0},  # one says equal: 0.5 each
        "q3": {"cat": 1.0},  # not shared: left out
        "q4": {"ann": 0.0, "cat": 0.0},  # both equal: 1
        "q5": {"dan": 0.5},
    }
    result = comparison_agreement(labels)
    assert result["ann"] == pytest.approx((0.5 + 0.5 + 1) / 3)
    assert result["bob"] == pytest.approx(0.5)
    assert result["cat"] == pytest.approx((0 + 1) / 2)
    assert result["dan"] is None
    assert comparison_agreement({}) == {}


def test_gold_accuracy():
    labels = {"g1": 1.0, "g2": 0.0, "g3": -0.5, "other": 1.0}
    assert gold_accuracy(labels, {"g1": 0.5, "g2": -1.0, "g3": 1.0}) == pytest.approx((1 + 0.5 + 0) / 3)
    assert gold_accuracy(labels, {"g9": 1.0}) is None


def test_ranking_pair_agreement():
    first = {"a": 1, "b": 2, "c": 3}
    assert ranking_pair_agreement(first, first) == 1
    assert ranking_pair_agreement(first, {"a": 3, "b": 2, "c": 1}) == 0
    assert ranking_pair_agreement(first, {"a": 1, "b": 3, "c": 2}) == pytest.approx(2 / 3)  # (b, c) reversed
    assert ranking_pair_agreement(first, {"a": 1, "b": 2, "c": 2}) == pytest.approx(
        2.5 / 3
    )  # (b, c) tied once
    assert ranking_pair_agreement({"a": 1, "b": 1}, {"a": 2, "b": 2}) == 1  # tied in both
    assert ranking_pair_agreement(first, {"a": 1, "z": 2}) is None


def test_ranking_agreement():
    rankings = {
        "p1": {
            "ann": {"a": 1, "b": 2, "c": 3},
            "bob": {"a": 1, "b": 3, "c": 2},
            "cat": {"a": 3, "b": 2, "c": 1},
        },
        "p2": {"ann": {"a": 1, "b": 2}, "bob": {"x": 1, "y": 2}},  # no answers in common: left out
        "p3": {"dan": {"a": 1, "b": 2}},
    }
    result = ranking_agreement(rankings)
    assert result["ann"] == pytest.approx((2 / 3 + 0) / 2)
    assert result["bob"] == pytest.approx((2 / 3 + 1 / 3) / 2)  # vs cat only (b, c) is ordered alike
    assert result["cat"] == pytest.approx((0 + 1 / 3) / 2)
    assert result["dan"] is None


def test_preference_rate_wilson_interval():
    rate, low, high = preference_rate([1.0] * 50 + [-0.5] * 50)
    assert rate == 0.5
    assert (low, high) == pytest.approx((0.40383, 0.59617), abs=1e-4)
    rate, low, high = preference_rate([1.0] * 10)
    assert (rate, low, high) == pytest.approx((1.0, 10 / (10 + 1.959964**2), 1.0))
    assert preference_rate([1.0, 0.5, 0.0, -1.0])[0] == pytest.approx(2.5 / 4)
    with pytest.raises(ValueError):
        preference_rate([])


def test_the_wilson_interval_at_small_counts_fractions_and_the_edges():
    assert wilson_interval(9, 10) == pytest.approx((0.5958, 0.9821), abs=1e-4)  # hand-computed
    assert wilson_interval(50, 100) == pytest.approx((0.40383, 0.59617), abs=1e-4)
    assert wilson_interval(2.5, 4) == pytest.approx((0.2194, 0.9081), abs=1e-4)  # ties as half wins
    assert wilson_interval(0, 5) == (0.0, pytest.approx(0.4345, abs=1e-4))  # exactly 0, not a hair above
    assert wilson_interval(5, 5) == (pytest.approx(0.5655, abs=1e-4), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)  # nothing counted: nothing known
    assert wilson_interval(9, 10, z=1.0)[0] > wilson_interval(9, 10)[0]  # a narrower interval at 68%
