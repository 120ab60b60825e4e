"""Question identity and split assignment."""

from collections import Counter

from annotation.questions.splits import (
    assign_split,
    normalize_question,
    question_key,
    with_explain_prefix,
)

RATIOS = {"bc": 0.4, "rm": 0.3, "rl": 0.2, "eval": 0.1}


def test_normalisation_ignores_case_spacing_and_final_punctuation():
    assert normalize_question("  Why is the SKY   blue? ") == normalize_question("why is the sky blue")
    assert question_key("Why is the sky blue?") == question_key("why is the  sky blue")
    assert question_key("Why is the sky blue?") != question_key("Why is the sea blue?")


def test_split_is_a_pure_function_of_the_key_and_ratios():
    keys = [question_key(f"question number {i}") for i in range(4000)]
    first = [assign_split(key, RATIOS) for key in keys]
    assert first == [assign_split(key, dict(RATIOS)) for key in keys]
    counts = Counter(first)
    for split, ratio in RATIOS.items():
        assert abs(counts[split] / len(keys) - ratio) < 0.03, (split, counts)


def test_a_zero_ratio_split_receives_nothing():
    ratios = {"bc": 0.5, "rm": 0.5, "rl": 0.0, "eval": 0.0}
    splits = {assign_split(question_key(f"q{i}"), ratios) for i in range(500)}
    assert splits == {"bc", "rm"}


def test_statements_get_the_explain_prefix_and_questions_do_not():
    assert (
        with_explain_prefix("the history of the printing press")
        == "Explain: the history of the printing press"
    )
    assert with_explain_prefix("Why do cats purr?") == "Why do cats purr?"
    assert with_explain_prefix("how magnets work") == "how magnets work"
    assert with_explain_prefix("Explain: tides") == "Explain: tides"
