"""Guided browsing (issue 38, groundwork; training/sampling/episode.py ``StepGuide``): at each step k commands
are sampled and the step scorer's best is taken. The selection on a backend that writes by seed, then a real
process reward model (training/runs/prm.py, a tiny BERT trained here) guiding a tiny Llama on the local
backend."""

from __future__ import annotations

import json

import pytest

from tests.test_prm import step_rows
from tests.test_sampling_core import QUESTIONS, browser, index  # noqa: F401 (a fixture)
from training.runs.prm import PRMConfig, train_prm
from training.sampling.best_of_n import RewardScorer
from training.sampling.episode import SamplingSettings, StepGuide, run_episodes
from training.sampling.local import LocalBackend
from training.sampling.policies import BCPolicy
from training.sampling.types import Completion

TEXTS = ["Scrolled down 1", "Search Crimean Bridge", "Back", "Top"]


class BySeed:
    """A backend whose text follows the request's seed (so k candidates differ, and repeat on a rerun)."""

    name = "by-seed"

    def __init__(self) -> None:
        self.requests = 0

    def complete(self, requests, on_tokens=None) -> list[Completion]:
        self.requests += len(requests)
        return [Completion(TEXTS[request.seed % len(TEXTS)], 2, "stop") for request in requests]


class Prefers:
    """A step scorer that likes searches: enough to check which candidate is taken."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []

    def score(self, prompts, answers) -> list[float]:
        self.calls.append((list(prompts), list(answers)))
        return [1.0 if answer.startswith("Search") else 0.0 for answer in answers]


def test_each_step_takes_the_best_scored_of_k_candidates_and_keeps_them_all(index):  # noqa: F811
    settings = SamplingSettings(max_actions=3, seed=4)
    scorer, backend = Prefers(), BySeed()
    browsers = [browser(index) for _ in range(2)]
    [first, second] = run_episodes(
        BCPolicy(backend), browsers, QUESTIONS[:2], settings, guide=StepGuide(scorer, 4)
    )

    assert backend.requests == 4 * (len(first.steps) + len(second.steps))  # k candidates a step
    for sample in (first, second):
        for step in sample.steps:
            assert len(step.candidates) == len(step.candidate_scores) == 4
            best = max(step.candidate_scores)
            assert step.command == step.candidates[step.candidate_scores.index(best)]  # the first of the best
        assert sample.tokens_generated == 2 * 4 * len(sample.steps) + (2 if sample.answer is not None else 0)
    # The scorer saw each step's own observation beside each candidate, in one call a round.
    prompts, answers = scorer.calls[0]
    assert prompts == [first.steps[0].observation] * 4 + [second.steps[0].observation] * 4
    assert answers[:4] == list(first.steps[0].candidates)


def test_one_candidate_a_step_is_unguided_browsing(index):  # noqa: F811
    settings = SamplingSettings(max_actions=4, seed=9)
    plain = run_episodes(BCPolicy(BySeed()), [browser(index)], QUESTIONS[:1], settings)
    guided = run_episodes(
        BCPolicy(BySeed()), [browser(index)], QUESTIONS[:1], settings, guide=StepGuide(Prefers(), 1)
    )
    assert guided[0].commands == plain[0].commands and not plain[0].steps[0].candidates
    with pytest.raises(ValueError, match="at least one command"):
        StepGuide(Prefers(), 0)


def test_a_trained_prm_steers_a_tiny_policy_towards_the_actions_it_learned_are_good(
    tmp_path,
    index,  # noqa: F811 (the fixture)
    tiny_bert_dir,
    tiny_llama_dir,
):
    """A tiny BERT PRM trained on step labels (on the question's first observation) where searches, quotes
    and clicks are good and every other move bad; a random tiny Llama browses as a BC policy under the
    command grammar (every valid form open), 4 episodes of 4 actions, unguided and then guided by the PRM
    (k = 4): the guided steps take the PRM's best candidate, and more of them are the moves it learned are
    good."""
    first = browser(index)
    first.reset(QUESTIONS[0])
    data = tmp_path / "step-labels.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in step_rows(80, observation=first.observation())))
    cfg = PRMConfig(data=str(data), output_dir=str(tmp_path / "prm"), base_model=str(tiny_bert_dir),
                    max_steps=120, batch_size=8, learning_rate=2e-3, eval_every=60, validation_fraction=0.25,
                    max_length=64)  # fmt: skip
    prm = RewardScorer(train_prm(cfg).output_dir, device="cpu", kind="prm")
    backend = LocalBackend(tiny_llama_dir, device="cpu")
    settings = SamplingSettings(
        max_actions=4, max_command_tokens=12, max_answer_tokens=4, seed=2, constrain_commands=True
    )

    def browse(guide: StepGuide | None) -> list:
        browsers = [browser(index) for _ in range(4)]
        return run_episodes(BCPolicy(backend), browsers, [QUESTIONS[0]] * 4, settings, guide=guide)

    good = ("Search", "Quote", "Clicked")
    plain = [step for sample in browse(None) for step in sample.steps]
    guided = [step for sample in browse(StepGuide(prm, 4)) for step in sample.steps]
    for step in guided:
        assert step.command == step.candidates[step.candidate_scores.index(max(step.candidate_scores))]
    share = lambda steps: sum(step.command.startswith(good) for step in steps) / len(steps)  # noqa: E731
    assert share(guided) > share(plain), ([s.command for s in plain], [s.command for s in guided])
