"""Best-of-n and declining to answer: a saved (tiny, random) reward model scores samples on exactly the
rm-pairs input it was trained on, the best answered sample wins (ties to the lowest index), answerless
samples never win, a threshold declines but keeps the scores, and coverage falls as the threshold rises."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation.exports.formats import rm_pair
from browser.engine.page import Quote
from tests.tiny_models import tiny_reward_model
from training.runs.reward import load_reward_model, score
from training.sampling.best_of_n import RewardScorer, choose, coverage_curve
from training.sampling.episode import EpisodeSample

OFFSET = 0.25
MAX_LENGTH = 64

QUESTION = "Why do bridges in cold places have expansion joints?"
QUOTES = (
    Quote(
        "Expansion joint",
        "https://en.wikipedia.org/wiki/Expansion_joint",
        "en.wikipedia.org",
        "An expansion joint is an assembly designed to hold parts together while safely absorbing the "
        "heat-induced expansion and contraction of construction materials. " * 3,
    ),
    Quote("Bridge", "https://example.org/bridge", "", "Steel expands in summer and contracts in winter."),
)
ANSWERS = [
    "Steel and concrete grow and shrink with the temperature, so the joints absorb the movement [1][2].",
    "Because of the wind.",
    "The joints let the deck expand in summer without cracking [1].",
    "Nobody knows.",
    "Expansion joints absorb thermal movement of the deck [1], which is large where winters are cold [2].",
]


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory) -> Path:
    return tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, OFFSET, MAX_LENGTH)


@pytest.fixture(scope="module")
def scorer(reward_dir) -> RewardScorer:
    return RewardScorer(reward_dir, device="cpu", batch_size=2)  # batches of 2: padding is exercised


def samples(answers: list[str | None], quotes: tuple[Quote, ...] = QUOTES) -> list[EpisodeSample]:
    return [
        EpisodeSample(question=QUESTION, episode_index=i, quotes=quotes if answer else (), answer=answer)
        for i, answer in enumerate(answers)
    ]


def test_the_scorer_scores_exactly_the_rm_pairs_input_minus_the_offset(scorer, reward_dir):
    assert scorer.max_length == MAX_LENGTH and scorer.offset == OFFSET
    found = scorer.score_samples(samples(ANSWERS))
    # The reference: rm-pairs rows as the export writes them from stored answers (quotes as dicts),
    # scored by the trainer's own function on a freshly loaded copy of the checkpoint, one at a time.
    model, tokenizer = load_reward_model(reward_dir)
    stored_quotes = [quote.to_dict() for quote in QUOTES]
    expected = []
    for answer in ANSWERS:
        row = rm_pair(QUESTION, {"text": answer, "quotes": stored_quotes}, {"text": "x", "quotes": []}, 1, {})
        expected.append(score(model, tokenizer, [row["prompt_chosen"]], [row["chosen"]], MAX_LENGTH)[0])
    assert found == pytest.approx([e - OFFSET for e in expected], abs=1e-5)
    assert max(found) - min(found) > 0.1  # the model tells these answers apart
    # Quotes are part of the input: the same answer without them scores differently.
    assert scorer.score_samples(samples(ANSWERS[:1], quotes=QUOTES[1:]))[0] != pytest.approx(found[0])
    assert scorer.score_samples(samples(ANSWERS)) == found  # deterministic


def test_only_a_trained_reward_model_scores(tiny_bert_dir):
    with pytest.raises(ValueError, match="not a trained reward model"):
        RewardScorer(tiny_bert_dir)  # a bare backbone: its head would be random


def test_best_of_n_picks_the_top_score_and_never_an_answerless_sample(scorer):
    batch = samples([ANSWERS[0], None, ANSWERS[1], ANSWERS[2], None, ANSWERS[3]])
    scores = scorer.score_samples(batch)
    assert scores[1] is None and scores[4] is None  # nothing to score: the policy declined
    answered = [i for i, s in enumerate(scores) if s is not None]
    top = max(answered, key=lambda i: scores[i])
    choice = choose(batch, scores)
    assert choice.chosen == choice.best == top and choice.answered and not choice.declined
    assert choice.best_score == scores[top] and choice.scores == tuple(scores)
    # Even a huge score on an answerless sample does not make it the answer.
    rigged = list(scores)
    rigged[4] = 1e9
    assert choose(batch, rigged).chosen == top
    # A question where every sample declined has no answer.
    nothing = choose(samples([None, None]), [None, None])
    assert nothing.chosen is None and nothing.best_score is None and not nothing.answered


def test_a_threshold_declines_and_keeps_every_score(scorer):
    batch = samples(ANSWERS)
    scores = scorer.score_samples(batch)
    best = max(scores)
    declined = choose(batch, scores, threshold=best + 0.01)
    assert declined.declined and declined.chosen is None and not declined.answered
    assert declined.scores == tuple(scores) and declined.best_score == best
    assert declined.best == scores.index(best)  # which sample would have answered is still known
    at_threshold = choose(batch, scores, threshold=best)  # at the threshold: answered
    assert not at_threshold.declined and at_threshold.chosen == scores.index(best)


def test_ties_pick_the_lowest_index():
    batch = samples(["a", "b", None, "c", "d"])
    assert choose(batch, [0.1, 0.7, 0.9, 0.7, 0.7]).chosen == 1
    assert choose(batch, [0.5, 0.5, 0.5, 0.5, 0.5]).chosen == 0
    with pytest.raises(ValueError, match="scores for"):
        choose(batch, [0.1])


scores_or_none = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False))


@given(st.lists(scores_or_none, max_size=30), st.lists(st.floats(-12, 12, allow_nan=False), max_size=20))
def test_coverage_does_not_rise_with_the_threshold(best_scores, thresholds):
    curve = coverage_curve(best_scores, thresholds)
    assert [t for t, _ in curve] == sorted(thresholds)
    coverages = [c for _, c in curve]
    assert all(0.0 <= c <= 1.0 for c in coverages)
    assert all(a >= b for a, b in itertools.pairwise(coverages))
    answered = sum(s is not None for s in best_scores)
    lowest = coverage_curve(best_scores, [-math.inf])[0][1]
    assert lowest == (answered / len(best_scores) if best_scores else 0.0)


@given(st.lists(st.tuples(st.booleans(), st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=12))
def test_choose_agrees_with_the_definition(rows):
    batch = samples([f"answer {i}" if has else None for i, (has, _) in enumerate(rows)])
    scores = [value if has else None for has, value in rows]
    answered = [i for i, (has, _) in enumerate(rows) if has]
    expected = min(answered, key=lambda i: (-rows[i][1], i)) if answered else None
    assert choose(batch, scores).chosen == expected
