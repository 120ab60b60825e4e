"""The RL trainer's real code on tiny random models (training/rl): what a step reports, the KL budget, a
cancel, browsing episodes in the real browser, and the policy it saves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from browser.engine.browser import Browser
from browser.engine.page import Quote
from browser.search.local import LocalIndex
from tests.test_sampling_core import ENV, seeded_tiny_llama
from tests.tiny_models import tiny_reward_model
from training.rl.config import BROWSE, RLConfig
from training.rl.trainer import train_rl
from training.rl.types import RLQuestion
from training.runs.hooks import Hooks

QUOTE = Quote(
    title="2022 AFL Grand Final",
    url="https://en.wikipedia.org/wiki/2022_AFL_Grand_Final",
    domain="en.wikipedia.org",
    extract="Geelong defeated Sydney by 81 points.",
)
QUESTIONS = [
    RLQuestion(1, "Who won the 2022 AFL Grand Final?", references=((QUOTE,),)),
    RLQuestion(2, "What happened to the Crimean Bridge in October 2022?"),  # no reference
]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return seeded_tiny_llama(tmp_path_factory.mktemp("rl-policy"))


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rl-rm"), tiny_bert_dir, offset=0.25, max_length=128)


def config(tmp_path: Path, policy_dir: Path, reward_dir: Path, **settings) -> RLConfig:
    defaults = {"steps": 2, "questions_per_step": 1, "group_size": 3, "max_answer_tokens": 8}
    return RLConfig(
        output_dir=str(tmp_path / "policy"),
        base_model=str(policy_dir),
        reward_model=str(reward_dir),
        **(defaults | settings),
    )


class Recorder:
    def __init__(self, stop_after: int = 0) -> None:
        self.logs, self.samples, self.stop_after = [], [], stop_after

    def hooks(self) -> Hooks:
        return Hooks(
            on_progress=lambda step, total, logs: self.logs.append((step, total, logs)),
            on_samples=lambda step, samples: self.samples.append((step, samples)),
            should_stop=lambda: bool(self.stop_after) and len(self.logs) >= self.stop_after,
        )


def test_an_answer_only_run_reports_each_step_and_saves_an_rl_policy(tmp_path, policy_dir, reward_dir):
    recorder = Recorder()
    result = train_rl(config(tmp_path, policy_dir, reward_dir), QUESTIONS, recorder.hooks())

    assert [(step, total) for step, total, _ in recorder.logs] == [(1, 2), (2, 2)]
    first = recorder.logs[0][2]
    assert first["episodes"] == 3 and first["answered"] == 1.0
    assert first["kl"] == 0.0  # the first episodes come from the starting policy itself
    assert recorder.logs[1][2]["kl"] > 0  # one update later they do not
    for _, _, logs in recorder.logs:
        assert {"reward_mean", "reward_std", "entropy", "answer_tokens", "loss", "seconds"} <= set(logs)
        assert "valid_actions" not in logs  # no browsing
    step, samples = recorder.samples[-1]
    assert step == 2 and len(samples) == 3
    assert {s.question_id for s in samples} == {1}  # the question without a reference is never a prompt
    assert sum(s.reward for s in samples) / 3 == pytest.approx(recorder.logs[1][2]["reward_mean"])

    assert result.steps == 2 and not result.cancelled
    assert result.metrics["reward_first"] == first["reward_mean"]
    summary = json.loads((tmp_path / "policy" / "training.json").read_text())
    assert summary["kind"] == "rl" and summary["policy_format"] == "prompted"
    assert summary["reward_model"] == str(reward_dir)
    # the saved weights moved away from the start
    before = AutoModelForCausalLM.from_pretrained(policy_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "policy").state_dict()
    assert any(not torch.equal(before[name], after[name]) for name in before)


def test_a_kl_budget_stops_the_run_before_the_update_that_would_pass_it(tmp_path, policy_dir, reward_dir):
    recorder = Recorder()
    cfg = config(tmp_path, policy_dir, reward_dir, steps=5, kl_budget=1e-9, learning_rate=1e-2)
    result = train_rl(cfg, QUESTIONS, recorder.hooks())

    assert len(recorder.logs) == 2  # step 1 (KL 0) updated; step 2 measured KL > budget and stopped
    assert recorder.logs[1][2]["kl"] > 1e-9
    assert result.steps == 1 and result.metrics["stopped"] == "kl_budget"
    assert (tmp_path / "policy" / "config.json").is_file()


def test_a_cancel_saves_nothing(tmp_path, policy_dir, reward_dir):
    recorder = Recorder(stop_after=1)
    result = train_rl(config(tmp_path, policy_dir, reward_dir, steps=3), QUESTIONS, recorder.hooks())
    assert result.cancelled and result.steps == 1
    assert not (tmp_path / "policy").exists()


def test_answer_only_episodes_need_a_reference(tmp_path, policy_dir, reward_dir):
    with pytest.raises(ValueError, match="no question of the run has a reference"):
        train_rl(config(tmp_path, policy_dir, reward_dir), QUESTIONS[1:])


def test_browsing_episodes_train_on_the_policys_commands_and_answers(
    tmp_path, policy_dir, reward_dir, freshwiki_index_dir
):
    index = LocalIndex.open(freshwiki_index_dir / "freshwiki")
    recorder = Recorder()
    cfg = config(
        tmp_path,
        policy_dir,
        reward_dir,
        episodes=BROWSE,
        steps=1,
        group_size=2,
        max_actions=3,
        max_command_tokens=12,
        answers_per_browse=2,
    )
    train_rl(cfg, QUESTIONS[1:], recorder.hooks(), browser_factory=lambda: Browser(index, ENV))

    logs = recorder.logs[0][2]
    assert 0 <= logs["valid_actions"] <= 1
    _, samples = recorder.samples[0]
    browsing = [s for s in samples if s.kind == "browse"]
    assert len(browsing) == 2
    assert all(1 <= len(s.commands) <= 3 for s in browsing)
    answer_only = [s for s in samples if s.kind == "answer"]
    # two answer-only episodes on the quotes of each browsing episode that gathered any (a guided policy
    # never declines, so those are the ones that answered)
    assert len(answer_only) == 2 * sum(1 for s in browsing if s.answer is not None)
    for sample in browsing:
        if sample.answer is None:
            assert sample.reward == cfg.no_answer_reward
    # Each answer-only episode has a seed of its own: none repeats the browsing answer on the same quotes
    # (the first of them once shared its seed, and so its text, with the first browsing episode's answer).
    answers = [s.answer for s in browsing if s.answer is not None]
    assert answers and not {s.answer for s in answer_only} & set(answers)


def test_answer_only_episodes_train_on_the_tokens_the_policy_sampled(tmp_path, policy_dir, reward_dir):
    from training.rl.rollout import Roller
    from training.runs.bc import load_policy
    from training.sampling.best_of_n import RewardScorer
    from training.sampling.local import LocalBackend
    from training.sampling.policies import PromptedPolicy

    cfg = config(tmp_path, policy_dir, reward_dir, max_answer_tokens=12)
    model, tokenizer = load_policy(policy_dir)
    backend = LocalBackend.over(model.eval(), tokenizer)
    roller = Roller(cfg, PromptedPolicy(backend), backend, RewardScorer(reward_dir), None)
    rollout = roller.step(1, [(QUESTIONS[0], (QUOTE,))])

    assert len(rollout.pairs) == cfg.group_size
    for index, ((_, completion, episode), report) in enumerate(
        zip(rollout.pairs, rollout.reports, strict=True)
    ):
        # exactly as many tokens as were generated, which decode to the answer the reward model scored
        assert len(completion) == report.answer_tokens
        assert tokenizer.decode(completion, skip_special_tokens=True).strip() == report.answer
        assert episode == index


def test_browsing_episodes_train_on_the_command_and_answer_tokens_the_policy_sampled(
    tmp_path, policy_dir, reward_dir, freshwiki_index_dir
):
    from training.rl.rollout import Roller, Rollout
    from training.runs.bc import load_policy
    from training.sampling.best_of_n import RewardScorer
    from training.sampling.episode import run_episodes
    from training.sampling.local import LocalBackend
    from training.sampling.policies import PromptedPolicy

    index = LocalIndex.open(freshwiki_index_dir / "freshwiki")
    cfg = config(tmp_path, policy_dir, reward_dir, episodes=BROWSE, max_actions=3, max_command_tokens=12)
    model, tokenizer = load_policy(policy_dir)
    backend = LocalBackend.over(model.eval(), tokenizer)
    roller = Roller(cfg, PromptedPolicy(backend), backend, RewardScorer(reward_dir), None)
    settings = roller.settings(1)
    browsers = [Browser(index, ENV) for _ in range(2)]
    samples = run_episodes(roller.policy, browsers, [QUESTIONS[1].text] * 2, settings)
    for sample in samples:
        rollout = Rollout()
        roller.add_browsing(rollout, sample, QUESTIONS[1], 0.0, group=0, settings=settings)
        expected = [list(step.token_ids) for step in sample.steps]
        if sample.answer is not None:
            expected.append(list(sample.answer_token_ids))
        # every completion trained on is the tokens generated, as many as the backend counted, and a command's
        # decode to the text the browser took (then the stop string that ended it)
        assert [completion for _, completion, _ in rollout.pairs] == expected
        for step in sample.steps:
            assert len(step.token_ids) == step.tokens
            assert tokenizer.decode(step.token_ids, skip_special_tokens=True).startswith(step.command)
