"""TriviaQA scoring (issue 39, groundwork) against values computed by hand: SQuAD's normalisation, exact
match, token F1 and alias containment, the best over a question's aliases; declines counted apart; the
interval a bootstrap over questions, the same for the same seed."""

from __future__ import annotations

import pytest

from training.evaluation.benchmarks import (
    TriviaQAAnswer,
    contains_alias,
    exact_match,
    f1_score,
    normalize_answer,
    triviaqa_scores,
)


def test_normalisation_is_squads():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("Theatre") == "theatre"  # an article only as a whole word


def test_each_measure_takes_the_best_alias():
    aliases = ["Paris", "City of Light"]
    assert exact_match("the city of light.", aliases) == 1.0
    assert exact_match("Paris, France", aliases) == 0.0
    # "paris france" against "paris": precision 1/2, recall 1, F1 = 2 * 0.5 * 1 / 1.5 = 2/3.
    assert f1_score("Paris, France", aliases) == pytest.approx(2 / 3)
    # "light city" against "city of light" (normalised "city of light"): 2 shared of 2 and 3 tokens: 0.8.
    assert f1_score("light city", aliases) == pytest.approx(0.8)
    assert f1_score("London", aliases) == 0.0
    assert contains_alias("It is Paris, the capital of France.", aliases) == 1.0
    assert contains_alias("A Parisian café", aliases) == 0.0  # whole tokens only


def test_scores_are_over_the_answered_questions_with_declines_apart():
    answers = [
        TriviaQAAnswer(1, "Paris", ["Paris"]),  # em 1, f1 1, contains 1
        TriviaQAAnswer(2, "Paris, France", ["Paris"]),  # em 0, f1 2/3, contains 1
        TriviaQAAnswer(3, "London", ["Paris"]),  # em 0, f1 0, contains 0
        TriviaQAAnswer(4, None, ["Rome"]),  # declined
    ]
    scores = triviaqa_scores(answers, resamples=200)
    assert (scores["questions"], scores["answered"], scores["declined"], scores["coverage"]) == (
        4,
        3,
        1,
        0.75,
    )
    assert scores["exact_match"]["value"] == pytest.approx(1 / 3)
    assert scores["f1"]["value"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert scores["contains"]["value"] == pytest.approx(2 / 3)
    for name in ("exact_match", "f1", "contains"):
        figure = scores[name]
        assert figure["judgements"] == figure["questions"] == 3
        assert 0.0 <= figure["low"] <= figure["value"] <= figure["high"] <= 1.0
    assert triviaqa_scores(answers, resamples=200) == scores  # the same seed, the same intervals
    nothing = triviaqa_scores([TriviaQAAnswer(1, None, ["x"])])
    assert nothing["exact_match"]["value"] is None and nothing["coverage"] == 0.0


def test_the_intervals_are_the_bootstrap_by_question_worked_by_hand():
    """Three answered questions: a resample of them is all-wrong with chance (2/3)^3 for exact match
    (scores 1, 0, 0) and all-right with (1/3)^3 = 3.7%, both above the 2.5% tails, so the 95% interval is
    the whole range; the same for F1 and containment. Forty questions, half right: the normal
    approximation's 0.5 +- 1.96 * sqrt(0.25 / 40) = 0.345 to 0.655."""
    three = [
        TriviaQAAnswer(1, "Paris", ["Paris"]),
        TriviaQAAnswer(2, "Paris, France", ["Paris"]),
        TriviaQAAnswer(3, "London", ["Paris"]),
    ]
    scores = triviaqa_scores(three, resamples=4000)
    for name in ("exact_match", "f1", "contains"):
        assert (scores[name]["low"], scores[name]["high"]) == (0.0, 1.0), name
    both_right = triviaqa_scores([TriviaQAAnswer(1, "Paris", ["Paris"]), TriviaQAAnswer(2, "Rome", ["Rome"])])
    assert (both_right["exact_match"]["low"], both_right["exact_match"]["high"]) == (1.0, 1.0)
    forty = [TriviaQAAnswer(i, "Paris" if i % 2 else "London", ["Paris"]) for i in range(40)]
    half = triviaqa_scores(forty, resamples=4000)["exact_match"]
    assert half["value"] == 0.5
    assert half["low"] == pytest.approx(0.345, abs=0.03) and half["high"] == pytest.approx(0.655, abs=0.03)
