"""Response validation for every feedback template (plain Python, no database)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.feedback import scales
from annotation.feedback.validation import (
    OVERALL_CONTRADICTS,
    OVERALL_EQUAL_BUT_AGREE,
    UNREADABLE,
    AnswerShape,
    Validation,
    draw_required_all,
    input_errors,
    required_fields,
    skip_reason_error,
    validate_response,
)

PAIR = [AnswerShape("A", 100, 2), AnswerShape("B", 50, 1)]
FOUR = [AnswerShape(str(n), 20, 0) for n in range(1, 5)]
ONE = [AnswerShape("1", 80, 3)]


def check(template, response, *, answers=PAIR, required_all=False, always=("overall",), preset=None):
    return validate_response(
        template, response, answers=answers, required_all=required_all, always_required=always, preset=preset
    )


def claim(start=0, end=10, **extra):
    return {"start": start, "end": end, "support": "supported", "relevance": "relevant", **extra}


def full_webgpt(**ratings):
    return {
        "flags": {"nonsense": False, "should_not_answer": False},
        "answers": {
            "A": {"trust": {"0": "trustworthy", "1": "somewhat"}, "claims": [claim(quotes=[1, 0, 1])]},
            "B": {"trust": {"0": "untrustworthy"}, "claims": [claim(5, 50, support="unsupported")]},
        },
        "ratings": {code: "a_better" for code, _ in scales.WEBGPT_DIMENSIONS} | ratings,
        "comment": "  fine  ",
    }


def test_scales_contract():
    labels = [label for _, label in scales.COMPARISON_SCALE]
    assert labels == ["A much better", "A better", "Equally good", "B better", "B much better"]
    values = [scales.preference_value(code) for code, _ in scales.COMPARISON_SCALE]
    assert values == [1, 0.5, 0, -0.5, -1]
    webglm = [f.code for f in scales.RATING_PRESETS["webglm"]]
    assert scales.default_always_required("rating", "webglm") == webglm
    for preset, fields in scales.RATING_PRESETS.items():
        assert set(scales.DEFAULT_ALWAYS_REQUIRED[preset]) <= {f.code for f in fields}


def test_webgpt_full_response_is_complete_and_cleaned():
    result = check("webgpt_comparison", full_webgpt() | {"extra": 1}, required_all=True)
    assert result.errors == {} and result.complete
    assert result.cleaned["answers"]["A"]["claims"][0]["quotes"] == [0, 1]
    assert result.cleaned["comment"] == "fine" and "extra" not in result.cleaned
    again = check("webgpt_comparison", result.cleaned, required_all=True)
    assert again.cleaned == result.cleaned


def test_webgpt_required_all_lists_every_part():
    result = check("webgpt_comparison", {"ratings": {"overall": "equal"}}, required_all=True)
    assert not result.complete
    expected = {"answers.A.trust.0", "answers.A.trust.1", "answers.B.trust.0", "answers.A.claims"}
    assert expected | {"answers.B.claims", "ratings.coherence", "ratings.unsupported"} <= set(result.errors)
    assert "ratings.overall" not in result.errors and "comment" not in result.errors
    paths = required_fields("webgpt_comparison", answers=PAIR, required_all=True, always_required=["overall"])
    assert set(paths) == set(result.errors) | {"ratings.overall"}


def test_webgpt_optional_parts_only_overall_required():
    assert check("webgpt_comparison", {}).errors == {"ratings.overall": "Rate “Overall usefulness”."}
    assert check("webgpt_comparison", {"ratings": {"overall": "b_much_better"}}).complete
    result = check("webgpt_comparison", {}, always=["coherence", "claims"])
    assert set(result.errors) == {"ratings.coherence", "answers.A.claims", "answers.B.claims"}


@pytest.mark.parametrize("flag", ["nonsense", "should_not_answer"])
def test_question_flag_ends_the_task_early(flag):
    response = {"flags": {flag: True}, "ratings": {"overall": "nonsense-code"}, "comment": "why"}
    result = check("webgpt_comparison", response, required_all=True)
    assert result.complete and result.errors == {}
    assert result.cleaned == {
        "flags": {"nonsense": flag == "nonsense", "should_not_answer": flag != "nonsense"},
        "comment": "why",
    }


def test_wrong_types_give_dotted_errors():
    response = {
        "flags": {"nonsense": "yes"},
        "answers": {"A": {"trust": {"5": "trustworthy", "0": 3}, "claims": "all"}, "B": []},
        "ratings": {"coherence": "better", "overall": "a_better"},
        "comment": 12,
    }
    errors = check("webgpt_comparison", response).errors
    expected = (
        "flags.nonsense answers.A.trust.5 answers.A.trust.0 answers.A.claims answers.B ratings.coherence"
    )
    assert set(errors) == {*expected.split(), "comment"}
    assert errors["answers.A.trust.5"] == "Answer A has only 2 references."
    assert "A much better" in errors["ratings.coherence"]


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        (claim(-1, 5), "start"),
        (claim(100, 101), "start"),
        (claim(10, 10), "end"),
        (claim(20, 101), "end"),
        (claim("a", 5), "start"),
        (claim(0, 5, support="maybe"), "support"),
        (claim(0, 5, relevance=None), "relevance"),
        (claim(0, 5, quotes=[2]), "quotes"),
        (claim(0, 5, quotes=[True]), "quotes"),
    ],
)
def test_claim_bounds(bad, path):
    result = check(
        "webgpt_comparison", {"answers": {"A": {"claims": [bad]}}, "ratings": {"overall": "equal"}}
    )
    assert f"answers.A.claims.0.{path}" in result.errors
    assert result.cleaned["answers"]["A"]["claims"] == []


def test_claims_may_overlap_and_touch_the_end():
    claims = [claim(0, 100, quotes=[1]), claim(50, 60, support="weakly_supported", relevance="irrelevant")]
    result = check(
        "webgpt_comparison", {"answers": {"A": {"claims": claims}}, "ratings": {"overall": "equal"}}
    )
    assert result.complete and len(result.cleaned["answers"]["A"]["claims"]) == 2


def test_a_second_claim_on_the_same_span_is_refused_whatever_its_support():
    claims = [claim(0, 10), claim(5, 10), claim(0, 10, support="unsupported"), claim("0", 10.0)]
    response = {"answers": {"A": {"claims": claims}}, "ratings": {"overall": "equal"}}
    result = check("webgpt_comparison", response)
    same = "marks the same span as claim 1: keep one (edit it to change its support)."
    assert result.errors == {f"answers.A.claims.{n}": f"Claim {n + 1} of answer A {same}" for n in (2, 3)}
    assert [(c["start"], c["end"]) for c in result.cleaned["answers"]["A"]["claims"]] == [(0, 10), (5, 10)]


def test_comparison_needs_slots_a_and_b():
    result = check("minimal_comparison", {"ratings": {"overall": "equal"}}, answers=FOUR)
    assert "answers" in result.errors


def test_minimal_comparison():
    good = {"ratings": {"accuracy": "a_better", "coherence": "equal", "overall": "a_much_better"}}
    assert check("minimal_comparison", good, required_all=True).complete
    result = check(
        "minimal_comparison", {"ratings": {"overall": "equal", "unsupported": "a_better"}}, required_all=True
    )
    assert set(result.errors) == {"ratings.accuracy", "ratings.coherence"}
    assert result.cleaned == {"ratings": {"overall": "equal"}, "comment": ""}


@pytest.mark.parametrize(
    ("ratings", "flags"),
    [
        ({"overall": "a_better", "coherence": "b_better"}, (OVERALL_CONTRADICTS,)),
        ({"overall": "b_much_better", "accuracy": "a_better", "coherence": "equal"}, (OVERALL_CONTRADICTS,)),
        ({"overall": "a_better", "coherence": "b_better", "accuracy": "a_much_better"}, ()),
        ({"overall": "a_better", "coherence": "equal", "accuracy": "equal"}, ()),
        (
            {"overall": "equal", "coherence": "b_better", "accuracy": "b_much_better"},
            (OVERALL_EQUAL_BUT_AGREE,),
        ),
        ({"overall": "equal", "coherence": "b_better"}, ()),
        ({"overall": "equal", "coherence": "b_better", "accuracy": "equal"}, ()),
        ({"overall": "equal", "coherence": "b_better", "accuracy": "a_better"}, ()),
        ({"coherence": "b_better", "accuracy": "a_better"}, ()),
    ],
)
def test_contradiction_flags_are_accepted(ratings, flags):
    result = check("minimal_comparison", {"ratings": ratings}, always=())
    assert result.flags == flags and result.complete


def test_contradiction_flag_on_webgpt_comparison():
    result = check("webgpt_comparison", full_webgpt(overall="b_better"), required_all=True)
    assert result.complete and result.flags == (OVERALL_CONTRADICTS,)


def test_ranking_ties_become_dense_ranks():
    response = {
        "ranks": {"1": 3, "2": "1", "3": 3, "4": 1.0, "9": 1},
        "likert": {"1": 2, "2": 7, "3": 4, "4": 6},
        "tags": {"1": ["hallucination", "fails_instruction", "hallucination"], "2": []},
    }
    result = check("ranking", response, answers=FOUR, required_all=True)
    assert result.complete, result.errors
    assert result.cleaned["ranks"] == {"1": 2, "2": 1, "3": 2, "4": 1}
    assert result.cleaned["tags"] == {"1": ["fails_instruction", "hallucination"]}


@pytest.mark.parametrize(
    ("preset", "taken", "refused"),
    [
        (None, "unsupported", "sexual_content"),  # no preset: WebGPT's set, for factual questions
        ("webgpt", "citation_errors", "inappropriate"),
        ("instructgpt", "sexual_content", "unsupported"),
    ],
)
def test_ranking_tags_come_from_the_batch_presets_set(preset, taken, refused):
    response = {"tags": {"1": [taken, "hallucination"]}}
    result = check("ranking", response, answers=FOUR, always=(), preset=preset)
    assert result.complete, result.errors
    assert set(result.cleaned["tags"]["1"]) == {taken, "hallucination"}
    wrong = check("ranking", {"tags": {"1": [refused]}}, answers=FOUR, always=(), preset=preset)
    labels = ", ".join(label for _, label in scales.ranking_tags(preset))
    assert wrong.errors == {"tags.1": f"Tags must be chosen from: {labels}."}


def test_rankings_default_to_webgpts_set_without_the_assistant_only_tags():
    assert scales.ranking_tags(None) == scales.ranking_tags("webgpt") == scales.WEBGPT_RANKING_TAGS
    webgpt = dict(scales.WEBGPT_RANKING_TAGS)
    assert "Contains sexual content" not in webgpt.values()
    assert "Inappropriate for a customer assistant" not in webgpt.values()
    assert [code for code, _ in scales.presets_for("ranking")] == ["webgpt", "instructgpt"]
    assert scales.ranking_tags("unknown") == ()


@pytest.mark.parametrize("k", [3, 10])
def test_ranking_k_bounds(k):
    answers = [AnswerShape(str(n), 5, 0) for n in range(1, k + 1)]
    ranks = {str(n): n for n in range(1, k + 1)}
    result = check("ranking", {"ranks": ranks}, answers=answers, always=["ranks"])
    assert "answers" in result.errors


def test_ranking_value_errors_and_required_policy():
    response = {"ranks": {"1": 5, "2": 0, "3": True}, "likert": {"1": 8}, "tags": {"2": ["nice"]}}
    result = check("ranking", response, answers=FOUR, always=["ranks"])
    assert set(result.errors) == {"ranks.1", "ranks.2", "ranks.3", "ranks.4", "likert.1", "tags.2"}
    assert result.errors["ranks.4"] == "Give answer 4 a rank."
    optional = check("ranking", {"ranks": {"1": 1, "2": 2, "3": 2, "4": 4}}, answers=FOUR, always=["ranks"])
    assert optional.complete and optional.cleaned["ranks"] == {"1": 1, "2": 2, "3": 2, "4": 3}
    assert set(check("ranking", {}, answers=FOUR, required_all=True, always=[]).errors) == {
        f"{part}.{n}" for part in ("ranks", "likert") for n in range(1, 5)
    }


def test_gophercite_justification_needs_seven_words():
    base = {"plausible": "yes", "supported": "unsure"}
    short = check(
        "rating",
        base | {"justification": "It quotes the right page."},
        answers=ONE,
        always=["plausible", "supported"],
        preset="gophercite",
    )
    assert short.errors == {"justification": "Write at least 7 words (5 so far)."}
    words = "The quote states the date and the place plainly."
    ok = check("rating", base | {"justification": words}, answers=ONE, required_all=True, preset="gophercite")
    assert ok.complete and ok.cleaned["justification"] == words
    missing = check("rating", base, answers=ONE, required_all=True, preset="gophercite")
    assert set(missing.errors) == {"justification"}
    assert check("rating", base, answers=ONE, always=["plausible", "supported"], preset="gophercite").complete


def test_rating_presets():
    assert check(
        "rating",
        {"truthful": "no", "informative": "maybe"},
        answers=ONE,
        always=["truthful"],
        preset="truthfulqa",
    ).errors.keys() == {"informative"}
    webglm = {f.code: (3 if len(f.choices) == 4 else "no") for f in scales.RATING_PRESETS["webglm"]}
    result = check(
        "rating", webglm, answers=ONE, always=scales.DEFAULT_ALWAYS_REQUIRED["webglm"], preset="webglm"
    )
    assert result.complete and result.cleaned["fluency"] == "3"
    incomplete = check(
        "rating", {"fluency": "4"}, answers=ONE, always=["fluency", "correctness"], preset="webglm"
    )
    assert set(incomplete.errors) == {"fluency", "correctness"}
    assert "preset" in check("rating", {}, answers=ONE, always=[], preset="nope").errors


def test_bad_template_and_response():
    assert check("essay", {}).errors.keys() == {"template"}
    for response in (None, [], "x", 3):
        assert check("minimal_comparison", response).errors.keys() == {"response"}


def test_draw_required_all_is_deterministic():
    assert draw_required_all("17", 0.1) == draw_required_all("17", 0.1)
    assert not draw_required_all("17", 0) and draw_required_all("17", 1)
    assert not draw_required_all("17", float("nan"))
    share = sum(draw_required_all(str(n), 0.1) for n in range(5000)) / 5000
    assert 0.08 < share < 0.12


VOCABULARY = sorted(
    {"flags", "answers", "trust", "claims", "start", "end", "support", "relevance", "quotes", "ratings"}
    | {"comment", "ranks", "likert", "tags", "A", "B", "0", "1", "2", "3", "4", "9"}
    | {code for code, _ in scales.WEBGPT_DIMENSIONS + scales.MINIMAL_DIMENSIONS + scales.QUESTION_FLAGS}
    | {f.code for fields in scales.RATING_PRESETS.values() for f in fields}
)
CODES = sorted(
    {c for group in (scales.COMPARISON_SCALE, scales.TRUST_LEVELS, scales.CLAIM_SUPPORT) for c, _ in group}
    | {"relevant", "yes", "no", "unsure", "3", "hallucination"}
)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-3, 200)
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(CODES)
)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(VOCABULARY) | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=30,
)
TASKS = st.sampled_from(
    [("webgpt_comparison", None, PAIR), ("minimal_comparison", None, PAIR), ("ranking", None, FOUR)]
    + [("rating", preset, ONE) for preset in scales.RATING_PRESETS]
    + [("ranking", None, FOUR[:2]), ("rating", None, ONE), ("webgpt_comparison", None, FOUR)]
)


@settings(max_examples=400, deadline=None)
@given(task=TASKS, response=JSON, required_all=st.booleans(), always=st.lists(st.sampled_from(VOCABULARY)))
def test_validation_never_raises(task, response, required_all, always):
    template, preset, answers = task
    result = check(
        template, response, answers=answers, required_all=required_all, always=always, preset=preset
    )
    assert isinstance(result, Validation)
    assert UNREADABLE not in result.errors.values()
    assert result.complete == (not result.errors)
    json.dumps(result.cleaned)


def test_input_errors_name_the_field_and_the_problem():
    """The one check the task page and the API run on what they receive."""
    assert input_errors({"ratings": {"overall": "a_better"}, "comment": "fine"}) == {}
    assert input_errors([]) == {"response": "The response must be a set of named fields."}
    assert input_errors({"answers": {"A": {"claims": [{"note": "a\x00"}]}}}) == {
        "answers.A.claims.0.note": "Text may not contain NUL characters (U+0000)."
    }
    assert "at most 20000" in input_errors({"comment": "x" * 20_001})["comment"]
    assert "too large" in input_errors({"tags": {str(n): ["x" * 19_000] for n in range(11)}})["response"]
    deep: dict = {}
    for _ in range(9):
        deep = {"x": deep}
    assert "nested more than 8" in input_errors(deep)["response"]
    assert input_errors({"ratings": "a_better", "answers": {"A": {"trust": [], "claims": "[]"}}}) == {
        "ratings": "Must be an object.",
        "answers.A.claims": "The claims must be a list of marked spans.",
    }


def test_skip_reasons_have_one_rule():
    assert skip_reason_error("The answers are in a language I do not read.") is None
    assert skip_reason_error("x" * 1000) is None
    refused = [(" ", "Say why"), (None, "Say why"), ("x" * 1001, "at most 1000"), ("a\x00", "NUL")]
    for reason, message in refused:
        assert message in skip_reason_error(reason)


@settings(max_examples=200, deadline=None)
@given(value=JSON)
def test_input_errors_never_raise_and_what_they_pass_is_storable(value):
    if not input_errors(value):  # PostgreSQL's jsonb takes it: strict JSON, no NUL
        assert "\\u0000" not in json.dumps(value, allow_nan=False)
