"""What a language-model judge is shown and how its output is read: the item blinded and in the order given,
as the task page shows it; a verdict checked exactly like a labeler's submission (good outputs kept, bad ones
refused with the reason, never an exception); the reward model's scores mapped onto the 5-point scale."""

from __future__ import annotations

import json
import math

import pytest

from annotation.feedback.scales import COMPARISON_SCALE, codes
from annotation.feedback.validation import AnswerShape
from training.judging.claims import Claim, claim_messages, claims_of, read_support
from training.judging.judges import derived_seed
from training.judging.outputs import check_verdict, find_json, read_verdict
from training.judging.prompts import (
    PROMPT_TEMPLATES,
    PROMPT_VERSIONS,
    example,
    messages_for,
    render_item,
    shown_item,
    verdict_schema,
)
from training.judging.reward import comparison_code, reward_response

SKY = {"title": "Sky", "url": "https://e.org/sky", "domain": "e.org", "extract": "Blue light scatters more."}
SEA = {"title": "Sea", "url": "https://f.org/sea", "domain": "f.org", "extract": "The sea is blue."}
RAYLEIGH = "Rayleigh scattering makes the sky blue [1]."
MIRROR = "The sky reflects the sea [1]."
SHAPES = (AnswerShape("A", len(RAYLEIGH), 1), AnswerShape("B", len(MIRROR), 1))


def comparison(template: str = "webgpt_comparison", first: str = RAYLEIGH, second: str = MIRROR):
    quotes = {RAYLEIGH: [SKY], MIRROR: [SEA]}
    return shown_item(
        template, "", "Why is the sky blue?", [(first, quotes[first]), (second, quotes[second])]
    )


def test_the_item_is_shown_in_the_order_given_with_its_references_and_nothing_about_its_source():
    text = render_item(comparison(first=MIRROR, second=RAYLEIGH))
    assert text.index("Answer A:\n" + MIRROR) < text.index("Answer B:\n" + RAYLEIGH)
    assert "[1] Sea (f.org)\nThe sea is blue." in text.split("Answer B:")[0]
    assert "[1] Sky (e.org)\nBlue light scatters more." in text.split("Answer B:")[1]
    system, user = messages_for("comparison-v1", comparison())
    for hidden in ("policy", "model", "side", "human", "demonstration", "https://"):
        assert hidden not in user.content.lower()
    assert (system.role, user.role) == ("system", "user")


def test_a_minimal_comparison_is_shown_without_citations_and_references_as_the_task_page_does():
    text = render_item(comparison("minimal_comparison"))
    assert (
        "Rayleigh scattering makes the sky blue." in text and "[1]" not in text and "Sky (e.org)" not in text
    )


def test_each_template_has_a_versioned_prompt_asking_for_its_fields():
    system = messages_for("comparison-v1", comparison())[0].content
    assert "supported_usefulness" in system and "should_not_answer" in system and "b_much_better" in system
    assert "nonsense" not in messages_for("comparison-v1", comparison("minimal_comparison"))[0].content
    ranking = shown_item("ranking", "", "Q?", [(f"answer {n}", []) for n in range(4)])
    assert "rank 4" in messages_for("ranking-v1", ranking)[0].content
    rating = shown_item("rating", "gophercite", "Q?", [("answer", [SKY])])
    assert "justification" in messages_for("rating-v1", rating)[0].content
    with pytest.raises(ValueError, match="does not judge"):
        messages_for("ranking-v1", comparison())
    assert set(PROMPT_VERSIONS.values()) == {"comparison-v1", "ranking-v1", "rating-v1"}
    assert all(template in PROMPT_TEMPLATES[version] for template, version in PROMPT_VERSIONS.items())


@pytest.mark.parametrize(
    ("template", "preset", "count"),
    [
        ("webgpt_comparison", "", 2),
        ("minimal_comparison", "", 2),
        ("ranking", "webgpt", 5),
        ("rating", "webglm", 1),
    ],
)
def test_the_example_in_every_prompt_is_itself_a_valid_verdict_of_its_schema(template, preset, count):
    item = shown_item(template, preset, "Q?", [(f"answer number {n}", [SKY]) for n in range(count)])
    shapes = [AnswerShape(answer.slot, len(answer.text), len(answer.quotes)) for answer in item.answers]
    verdict = example(item)
    assert set(verdict) == set(verdict_schema(item)["required"])
    if template == "rating":  # the example's "..." is no 7-word justification: webglm has none
        assert "justification" not in verdict
    response, error = check_verdict(template, preset, verdict, shapes, [])
    assert error == "" and response is not None


def test_a_verdict_in_a_code_fence_is_read_and_cleaned_like_a_submission():
    ratings = {"overall": "a_better", "coherence": "equal"}
    text = "Sure!\n```json\n" + json.dumps({"ratings": ratings, "confidence": 0.8, "junk": 1}) + "\n```"
    verdict = read_verdict(text, "webgpt_comparison", "", SHAPES, ["overall"])
    assert verdict.error == "" and verdict.confidence == 0.8 and verdict.raw_output == text
    assert verdict.response["ratings"] == ratings
    assert verdict.response["flags"] == {"nonsense": False, "should_not_answer": False}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I prefer answer A.", "no JSON object"),
        ('{"ratings": {"overall": "a_better"', "could not be read"),
        ('{"ratings": {"overall": "A"}}', "ratings.overall"),
        ('{"ratings": {"coherence": "equal"}}', "ratings.overall: Rate"),
        ('{"ratings": "a_better"}', "ratings:"),
        ('["a_better"]', "no JSON object"),
        ('{"ratings": {"overall": "equal"}, "answers": []}', "answers: The answers part"),
        ('{"comment": "x\\u0000"}', "NUL"),
    ],
)
def test_an_unreadable_or_invalid_output_is_a_verdict_with_its_reason(text, reason):
    verdict = read_verdict(text, "webgpt_comparison", "", SHAPES, ["overall"])
    assert verdict.response is None and reason in verdict.error and verdict.raw_output == text


def test_a_batch_that_requires_claims_and_trust_does_not_require_them_of_a_judge():
    verdict = read_verdict(
        '{"ratings": {"overall": "equal"}}', "webgpt_comparison", "", SHAPES, ["overall", "claims", "trust"]
    )
    assert verdict.error == ""
    verdict = read_verdict(
        '{"ratings": {"overall": "equal"}}', "webgpt_comparison", "", SHAPES, ["coherence"]
    )
    assert "ratings.coherence" in verdict.error


def test_a_confidence_outside_zero_to_one_is_left_out():
    for given in (1.5, -0.1, "0.9", True, None):
        text = json.dumps({"ratings": {"overall": "equal"}, "confidence": given})
        assert read_verdict(text, "minimal_comparison", "", SHAPES, ["overall"]).confidence is None


def test_rankings_and_ratings_are_checked_by_their_rules():
    shapes = [AnswerShape(str(n), 10, 0) for n in range(1, 5)]
    good = read_verdict('{"ranks": {"1": 2, "2": 1, "3": 4, "4": 4}}', "ranking", "webgpt", shapes, ["ranks"])
    assert good.response["ranks"] == {"1": 2, "2": 1, "3": 3, "4": 3}  # dense, as for labelers
    bad = read_verdict('{"ranks": {"1": 9}}', "ranking", "webgpt", shapes, ["ranks"])
    assert "ranks.1" in bad.error and "ranks.2" in bad.error
    short = '{"plausible": "yes", "supported": "no", "justification": "too short"}'
    rating = read_verdict(
        short, "rating", "gophercite", [AnswerShape("1", 10, 1)], ["plausible", "supported"]
    )
    assert "justification: Write at least 7 words" in rating.error


def test_the_first_json_object_is_found_after_words_and_braces_inside_strings_are_text():
    assert find_json('ReadOutput: {"comment": "a } inside", "n": 1} trailing {')[0] == {
        "comment": "a } inside",
        "n": 1,
    }


def test_a_raw_newline_or_tab_inside_a_string_is_read_as_written():
    # llama.cpp's JSON grammar lets a model write them (tests/test_llama_cpp_server.py met one).
    assert find_json('{"comment": "line one\nline\ttwo", "n": 1}') == (
        {"comment": "line one\nline\ttwo", "n": 1},
        "",
    )


def test_the_reward_model_maps_score_differences_onto_the_scale_with_its_margins():
    assert comparison_code(0.05, 0.1, 1.0) == "equal" and comparison_code(-0.1, 0.1, 1.0) == "equal"
    assert comparison_code(0.5, 0.1, 1.0) == "a_better" and comparison_code(-0.5, 0.1, 1.0) == "b_better"
    assert (
        comparison_code(1.5, 0.1, 1.0) == "a_much_better" and comparison_code(-2, 0.1, 1.0) == "b_much_better"
    )
    response, confidence = reward_response("webgpt_comparison", [0.2, 1.4], 0.1, 1.0)
    assert response == {"ratings": {"overall": "b_much_better"}}
    assert confidence == pytest.approx(1 / (1 + math.exp(-1.2)))
    ranks, none = reward_response("ranking", [0.1, 0.9, 0.1, -2.0], 0.1, 1.0)
    assert ranks == {"ranks": {"1": 2, "2": 1, "3": 2, "4": 4}} and none is None
    with pytest.raises(ValueError, match="cannot judge a rating batch"):
        reward_response("rating", [0.3], 0.1, 1.0)
    assert set(codes(COMPARISON_SCALE)) >= {comparison_code(d / 10, 0.1, 1.0) for d in range(-20, 21)}


def test_seeds_differ_by_item_and_order_and_repeat_for_the_same_run():
    seeds = {derived_seed(7, item, order) for item in range(50) for order in ("drawn", "swapped")}
    assert len(seeds) == 100 and all(0 <= seed < 2**31 for seed in seeds)
    assert derived_seed(7, 3, "drawn") == derived_seed(7, 3, "drawn") != derived_seed(8, 3, "drawn")


def test_claims_are_read_from_a_response_with_their_linked_quotes_and_checked():
    response = {
        "answers": {
            "A": {"claims": [{"start": 0, "end": 8, "quotes": [0]}, {"start": 0, "end": 999, "quotes": [0]}]},
            "B": {"claims": [{"start": 4, "end": 7, "quotes": []}]},
        }
    }
    found = list(claims_of(9, "Why?", response, [(RAYLEIGH, [SKY]), (MIRROR, [SEA])]))
    assert [(c.slot, c.index, c.span, len(c.quotes)) for c in found] == [
        ("A", 0, "Rayleigh", 1),
        ("B", 0, "sky", 0),
    ]
    assert "Blue light scatters more." in claim_messages(found[0])[1].content
    assert "no quote is linked" in claim_messages(Claim(9, "B", 0, "Why?", "sky", ()))[1].content
    assert read_support('{"support": "weakly"}') == ("weakly", "")
    assert read_support("supported")[0] == "" and "must be one of" in read_support('{"support": "yes"}')[1]
