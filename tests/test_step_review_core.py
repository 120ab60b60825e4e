"""Step-level review's rules (annotation/feedback/steps.py): what a step-ratings or step-preference response
may be, and how labelers' step labels agree, checked against the ``krippendorff`` package."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation.feedback.steps import (
    NO_BAD_STEP,
    check_step_preference,
    check_step_ratings,
    first_bad_value,
    step_agreement,
)


def rated(*ratings: str, first_bad: int | None = None, **extra) -> dict:
    """A response rating steps 0, 1, ... in order; a bad step gets the reason "wrong_link"."""
    steps = {
        str(i): {"rating": r} | ({"reason": "wrong_link"} if r == "bad" else {})
        for i, r in enumerate(ratings)
    }
    return {"steps": steps, "first_bad": first_bad} | extra


def test_a_complete_review_is_cleaned_and_keeps_what_the_labeler_said():
    response = rated("good", "neutral", "bad", first_bad=2, comment="  clicked the wrong result ")
    response["steps"]["2"]["note"] = "result 3 was the obvious one"
    check = check_step_ratings(response, 4)
    assert check.complete, check.errors
    assert check.cleaned == {
        "steps": {
            "0": {"rating": "good"},
            "1": {"rating": "neutral"},
            "2": {"rating": "bad", "reason": "wrong_link", "note": "result 3 was the obvious one"},
        },
        "first_bad": 2,
        "comment": "clicked the wrong result",
    }
    assert first_bad_value(check.cleaned) == 2


def test_steps_after_the_first_bad_one_may_stay_unrated_unless_the_draw_requires_everything():
    """PRM800K's labelers stopped at the first mistake; the batch's required-field draw can ask for all."""
    response = rated("good", "bad", first_bad=1)
    assert check_step_ratings(response, 5).complete
    required = check_step_ratings(response, 5, required_all=True)
    assert set(required.errors) == {"steps.2", "steps.3", "steps.4"}


def test_without_a_bad_step_every_step_is_rated_and_the_first_bad_step_is_none():
    assert check_step_ratings(rated("good", "neutral", "good"), 3).cleaned["first_bad"] is None
    assert first_bad_value(check_step_ratings(rated("good"), 1).cleaned) == NO_BAD_STEP
    missing = check_step_ratings(rated("good", "good"), 4)
    assert missing.errors == {"steps.2": "Rate step 3.", "steps.3": "Rate step 4."}


@pytest.mark.parametrize(
    ("response", "path", "message"),
    [
        (rated("good", "bad"), "first_bad", "Mark the first bad step (step 2 is rated bad)."),
        (
            rated("good", "neutral", first_bad=1),
            "first_bad",
            "The first bad step, step 2, must be rated bad.",
        ),
        (
            rated("bad", "bad", first_bad=1),
            "first_bad",
            "Step 1 is rated bad, before the step marked first bad.",
        ),
        (rated("good", first_bad=7), "first_bad", "The first bad step must be one of steps 0 to 2."),
        (rated("good", first_bad="x"), "first_bad", "The first bad step must be one of steps 0 to 2."),
        ({"steps": {"0": {"rating": "bad"}}, "first_bad": 0}, "steps.0.reason", "Say why the step is bad."),
        (
            {"steps": {"0": {"rating": "bad", "reason": "other"}}, "first_bad": 0},
            "steps.0.note",
            "Say in the note what is wrong with the step.",
        ),
        (
            {"steps": {"0": {"rating": "good", "reason": "no_result"}}},
            "steps.0.reason",
            "Only a bad step takes a reason.",
        ),
        (
            {"steps": {"0": {"reason": "no_result"}}},
            "steps.0.rating",
            "Rate the step as well as giving a reason.",
        ),
        (
            {"steps": {"0": {"rating": "great"}}},
            "steps.0.rating",
            "Rating: choose one of Good, Neutral, Bad.",
        ),
        (
            {"steps": {"3": {"rating": "good"}}},
            "steps.3",
            "There is no step '3': the episode has steps 0 to 2.",
        ),
        (
            {"steps": {"-1": {"rating": "good"}}},
            "steps.-1",
            "There is no step '-1': the episode has steps 0 to 2.",
        ),
        ({"steps": ["good"]}, "steps", "Step ratings must be given by step number."),
        ("good", "response", "The response must be a set of named fields."),
    ],
)
def test_a_review_that_contradicts_itself_or_leaves_a_gap_is_refused_with_the_field_and_why(
    response, path, message
):
    check = check_step_ratings(response, 3)
    assert not check.complete
    assert check.errors[path] == message


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=4),
                    max_leaves=12),
       st.integers(min_value=1, max_value=6))  # fmt: skip
def test_whatever_arrives_the_check_answers_with_errors_never_an_exception(response, steps):
    check = check_step_ratings(response, steps)
    assert check.complete == (not check.errors)
    if check.complete:  # what is stored is self-consistent
        bad = [int(k) for k, v in check.cleaned["steps"].items() if v["rating"] == "bad"]
        assert check.cleaned["first_bad"] == (min(bad) if bad else None)
    assert check_step_preference(response).complete == (not check_step_preference(response).errors)


def test_a_step_preference_needs_a_side_and_explains_other():
    assert check_step_preference({"preference": "b_better", "reason": "repeated_action"}).cleaned == {
        "preference": "b_better",
        "reason": "repeated_action",
        "comment": "",
    }
    assert check_step_preference({}).errors == {"preference": "Say which action is better."}
    assert "preference" in check_step_preference({"preference": "c_better"}).errors
    other = check_step_preference({"preference": "a_better", "reason": "other"})
    assert other.errors == {"comment": "Say in the comment what is wrong with the worse action."}


def test_agreement_on_step_ratings_and_the_first_bad_step_equals_the_reference_package():
    """Three labelers on three episodes; each stops at their first bad step (later steps unrated)."""
    responses = {
        "e1": {
            "ann": rated("good", "good", "bad", first_bad=2),
            "bo": rated("good", "neutral", "bad", first_bad=2),
            "cy": rated("good", "bad", first_bad=1),
        },
        "e2": {"ann": rated("neutral", "good", "good"), "bo": rated("neutral", "good", "good")},
        "e3": {
            "ann": rated("bad", first_bad=0),
            "bo": rated("good", "bad", first_bad=1),
            "cy": rated("bad", first_bad=0),
        },
    }
    result = step_agreement(responses, resamples=200)

    order = {"bad": 0, "neutral": 1, "good": 2}
    labelers = ["ann", "bo", "cy"]
    units = [(item, step) for item in responses for step in range(3)]
    table = [
        [
            order[responses[item][who]["steps"][str(step)]["rating"]]
            if who in responses[item] and str(step) in responses[item][who]["steps"]
            else np.nan
            for item, step in units
        ]
        for who in labelers
    ]
    expected = krippendorff.alpha(reliability_data=table, level_of_measurement="ordinal")
    assert result.ratings.alpha == pytest.approx(expected)
    assert result.ratings.items == 3 and result.ratings.low is not None

    # the first bad step: positions 0..2, "none" after the last (e2 has none)
    position = {0: 0, 1: 1, 2: 2, None: 3}
    marks = [
        [
            position[responses[item][who]["first_bad"]] if who in responses[item] else np.nan
            for item in responses
        ]
        for who in labelers
    ]
    assert result.first_bad.alpha == pytest.approx(
        krippendorff.alpha(reliability_data=marks, level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])
    )
    # pairs on the same item: e1 (2,2) (2,1) (2,1); e2 (none, none); e3 (0,1) (0,0) (1,0): 3 of 7 the same
    assert (result.first_bad_same, result.first_bad_pairs) == (pytest.approx(3 / 7), 7)


def test_no_pairable_step_gives_no_figure_rather_than_a_number():
    result = step_agreement({"e1": {"ann": rated("good", "bad", first_bad=1)}}, resamples=0)
    assert result.ratings.alpha is None and result.first_bad.alpha is None
    assert (result.first_bad_same, result.first_bad_pairs) == (None, 0)


def test_a_gold_disagreement_on_a_step_item_is_shown_in_words():
    from annotation.workforce.as_seen import reference_lines, response_lines
    from annotation.workforce.judgements import canonical

    mine = {
        "steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "wrong_link"}},
        "first_bad": 1,
    }
    reference = canonical("step_review", {"steps": {"0": {"rating": "good"}}, "first_bad": None}, [])
    assert [(line.label, line.value) for line in response_lines("step_review", "", mine, [])] == [
        ("First bad step", "step 2")
    ]
    assert [(line.label, line.value) for line in reference_lines("step_review", "", reference, [])] == [
        ("First bad step", "none: every step good or neutral")
    ]
    preferred = canonical("step_preference", {"preference": "b_better"}, [])
    assert [(line.label, line.value) for line in reference_lines("step_preference", "", preferred, [])] == [
        ("Which next action is better", "B better")
    ]
