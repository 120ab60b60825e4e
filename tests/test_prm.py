"""The process reward model's trainer (training/runs/prm.py): step-label rows read and refused with their row
number, the validation figures against hand-computed values, and a tiny model that learns which actions are
good from ratings and preferences."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from annotation.feedback.steps import check_step_preference, check_step_ratings, preference_row, rating_rows
from training.runs.prm import PRMConfig, StepData, split, step_labels, step_metrics, train_prm
from training.runs.reward import load_reward_model, score

GOOD = ["Search {w} history", "Quote: the {w} was built", "Clicked on link 2"]
BAD = ["Back", "Scrolled up 3", "Top", "Scrolled down 2", "Find in page: {w}", "End: Answer"]
WORDS = ["river", "bridge", "castle", "winter", "harbour", "signal", "market", "garden", "tower", "orbit"]


def step_rows(episodes: int, seed: int = 0, observation: str = "") -> list[dict]:
    """Episodes of 4 steps, each labeler stopping at the first bad step (PRM800K), and at every state a
    preference between a good and a bad candidate, in a random order. Searches, quotes and clicks are good;
    the other moves bad. ``observation``: what every step saw (by default a short made-up one)."""
    draw = random.Random(seed)  # noqa: S311 (test data)
    rows = []
    for episode in range(episodes):
        word = WORDS[episode % len(WORDS)]
        seen = (
            observation or f"♦Question\nWhat about the {word}?\n♦Text\n... {word} {episode} ...\n♦Next action"
        )
        first_bad = None
        for step in range(4):
            good = draw.random() < 0.6
            action = draw.choice(GOOD if good else BAD).format(w=word)
            if not good and first_bad is None:
                first_bad = step
            rows.append({"kind": "rating", "question_id": episode, "episode_id": episode, "labeler": "ann",
                         "step": step, "observation": seen, "action": action,
                         "rating": "good" if good else "bad"})  # fmt: skip
            if not good:
                break
        for row in rows[-(step + 1) :]:
            row["first_bad"] = first_bad
        a, b = draw.choice(GOOD).format(w=word), draw.choice(BAD).format(w=word)
        a_first = draw.random() < 0.5
        rows.append({"kind": "preference", "question_id": episode, "episode_id": episode, "labeler": "ann",
                     "step": 0, "observation": seen, "action_a": a if a_first else b,
                     "action_b": b if a_first else a,
                     "preference": "a_better" if a_first else "b_much_better"})  # fmt: skip
    return rows


def test_rows_become_ratings_and_preferences_and_a_bad_row_is_named():
    rows = step_rows(3)
    data = step_labels(rows)
    assert len(data.ratings) == sum(r["kind"] == "rating" for r in rows) and len(data.preferences) == 3
    assert {p.target for p in data.preferences} <= {0.0, 1.0}
    assert (
        len(step_labels(rows, "ratings").preferences) == 0
        and len(step_labels(rows, "preferences").ratings) == 0
    )
    with pytest.raises(ValueError, match="row 2: rating must be one of good, neutral, bad"):
        step_labels([rows[0], rows[0] | {"rating": "fine"}])
    with pytest.raises(ValueError, match="row 1: missing 'observation'"):
        step_labels([{k: v for k, v in rows[0].items() if k != "observation"}])
    with pytest.raises(ValueError, match="row 1: not a step label"):
        step_labels([{"prompt_chosen": "x"}])


def test_a_split_keeps_every_label_of_a_question_on_one_side():
    train, held = split(step_labels(step_rows(40)), 0.25, seed=1)
    assert len(held) and len(train)
    sides = {r.question for r in train.ratings} | {p.question for p in train.preferences}
    assert not sides & ({r.question for r in held.ratings} | {p.question for p in held.preferences})


def test_the_validation_figures_match_a_hand_count():
    def row(labeler: str, episode: int, step: int, rating: str, first_bad: int | None) -> dict:
        return {"kind": "rating", "question_id": episode, "episode_id": episode, "labeler": labeler,
                "step": step, "observation": "o", "action": "x", "rating": rating,
                "first_bad": first_bad}  # fmt: skip

    rows = [
        # ann on episode 1: good, good, bad (first bad 2); bo on episode 1: good, bad (first bad 1)
        *(row("ann", 1, s, r, 2) for s, r in enumerate(["good", "good", "bad"])),
        *(row("bo", 1, s, r, 1) for s, r in enumerate(["good", "bad"])),
        # ann on episode 2: neutral, good, no bad step
        *(row("ann", 2, s, r, None) for s, r in enumerate(["neutral", "good"])),
    ]
    data = step_labels(rows)
    scores = [1.0, -0.5, -2.0, 0.3, -0.1, -3.0, 2.0]
    found = step_metrics(scores, data, [])
    # decided steps (no neutral): ann 1.0 good ok, -0.5 good wrong, -2.0 bad ok; bo 0.3 good ok, -0.1 bad ok;
    # ep2 2.0 good ok -> 5 of 6
    assert found["step_accuracy"]["value"] == pytest.approx(5 / 6) and found["step_accuracy"]["count"] == 6
    # first scored below 0: ann ep1 step 1 (marked 2: wrong), bo ep1 step 1 (right), ann ep2 step 0
    # (marked none: wrong)
    assert (
        found["first_bad_accuracy"]["value"] == pytest.approx(1 / 3)
        and found["first_bad_accuracy"]["count"] == 3
    )
    assert (found["preference_accuracy"]["value"], found["preference_accuracy"]["count"]) == (None, 0)
    with_pairs = StepData([], step_labels(step_rows(2), "preferences").preferences)
    targets = [p.target for p in with_pairs.preferences]
    pair_scores = [(1.0, 0.0) if t == 1.0 else (0.0, 1.0) for t in targets]
    assert step_metrics([], with_pairs, pair_scores)["preference_accuracy"]["value"] == 1.0


def test_a_tiny_prm_learns_which_actions_are_good_from_ratings_and_preferences(tmp_path, tiny_bert_dir):
    data = tmp_path / "step-labels.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in step_rows(80)))
    cfg = PRMConfig(
        data=str(data),
        output_dir=str(tmp_path / "prm"),
        base_model=str(tiny_bert_dir),
        max_steps=120,
        batch_size=8,
        learning_rate=2e-3,
        eval_every=40,
        validation_fraction=0.25,
        max_length=64,
    )
    result = train_prm(cfg)
    figures = result.metrics["validation"]
    assert figures["step_accuracy"]["value"] > 0.9, figures
    assert figures["preference_accuracy"]["value"] > 0.9, figures
    assert figures["first_bad_accuracy"]["count"] > 0 and figures["first_bad_accuracy"]["value"] > 0.7
    summary = json.loads((Path(result.output_dir) / "training.json").read_text())
    assert summary["kind"] == "prm" and summary["config"]["labels"] == "both"
    model, tokenizer = load_reward_model(Path(result.output_dir))
    # Observations it never saw (another episode number), a good and a bad move on each: good scores higher.
    unseen = [f"♦Question\nWhat about the {w}?\n♦Text\n... {w} 999 ...\n♦Next action" for w in WORDS[:5]]
    good = score(model, tokenizer, unseen, [f"Search {w} history" for w in WORDS[:5]], 64)
    bad = score(model, tokenizer, unseen, ["Back"] * 5, 64)
    assert all(g > b for g, b in zip(good, bad, strict=True)), (good, bad)


def test_labels_must_be_one_the_trainer_knows(tmp_path):
    with pytest.raises(ValueError, match="labels must be one of ratings, preferences, both"):
        PRMConfig(data="x.jsonl", output_dir=str(tmp_path), labels="steps").check()


def test_what_a_labeler_submits_becomes_rows_the_trainer_reads():
    """The contract between the step-review task (annotation/feedback/steps.py) and the trainer: a checked
    response's rows, read back, are the same labels."""
    observations, commands = ["o0", "o1", "o2", "o3"], ["Search x", "Clicked on link 1", "Back", "Top"]
    review = check_step_ratings(
        {"steps": {"0": {"rating": "good"}, "1": {"rating": "neutral"},
                   "2": {"rating": "bad", "reason": "repeated_action"}}, "first_bad": 2},
        len(commands),
    )  # fmt: skip
    preference = check_step_preference({"preference": "b_much_better", "reason": "wrong_link"})
    assert review.complete and preference.complete
    meta = {"question_id": 7, "episode_id": 3, "labeler": "ann"}
    rows = rating_rows(review.cleaned, observations, commands, **meta)
    rows.append(preference_row(preference.cleaned, "o1", ("Back", "Search y"), step=1, **meta))
    data = step_labels(rows)
    assert [(r.step, r.observation, r.action, r.rating, r.first_bad) for r in data.ratings] == [
        (0, "o0", "Search x", "good", 2),
        (1, "o1", "Clicked on link 1", "neutral", 2),
        (2, "o2", "Back", "bad", 2),
    ]
    assert {r.sequence for r in data.ratings} == {(3, "ann")} and {r.question for r in data.ratings} == {"7"}
    [chosen] = data.preferences
    assert (chosen.observation, chosen.actions, chosen.target) == ("o1", ("Back", "Search y"), 0.0)
