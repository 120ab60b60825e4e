"""Checkpoints and resume in the trainers themselves (no worker, no database): a run that crashes after a
checkpoint and is started again with the same state folder continues from it (model, optimizer, schedule,
random states, data position) and ends where the uninterrupted run ends, for BC, the reward model and RL.
A worker killed for real, and resumed by the sweeper, is tests/test_training_processes.py's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

from tests.test_rl_trainer import QUESTIONS
from tests.test_rl_trainer import config as rl_config
from tests.test_training import bc_rows, citing_pairs, write_jsonl
from training.rl import state
from training.rl.trainer import train_rl
from training.runs.bc import train_bc
from training.runs.config import BCConfig, RMConfig
from training.runs.hooks import Hooks
from training.runs.reward import train_reward_model


class Crash(Exception):
    """What a worker's death looks like from inside the trainer: it stops mid-run, nothing cleaned up."""


def crashing_at(step: int) -> Hooks:
    def on_progress(at: int, total: int, logs: dict) -> None:
        if at >= step:
            raise Crash(f"killed at step {at}")

    return Hooks(on_progress=on_progress)


def losses(history: list[dict]) -> dict[int, float]:
    return {int(entry["step"]): entry["loss"] for entry in history if "loss" in entry}


def weights(model) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in model.named_parameters()}


def assert_same_weights(left, right, tolerance: float) -> None:
    a, b = weights(left), weights(right)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=tolerance, rtol=0, msg=name)


def resume_matches(train, cfg, crash_step: int, resumed_from: int, tmp_path: Path):
    """The run uninterrupted, and crashed at ``crash_step`` then started again: both results."""
    whole = train(replace(cfg, output_dir=str(tmp_path / "whole"), state_dir=str(tmp_path / "whole-state")))
    cut = replace(cfg, output_dir=str(tmp_path / "cut"), state_dir=str(tmp_path / "cut-state"))
    with pytest.raises(Crash):
        train(cut, crashing_at(crash_step))
    seen = []
    hooks = Hooks(on_resume=lambda step, history: seen.append((step, history)))
    again = train(cut, hooks)
    assert again.resumed_from == resumed_from and [step for step, _ in seen] == [resumed_from]
    assert max(losses(seen[0][1])) == resumed_from  # the logs up to the checkpoint, none after
    assert again.steps == whole.steps and losses(again.history).keys() == losses(whole.history).keys()
    return whole, again


def test_a_bc_run_resumed_after_a_crash_ends_where_the_uninterrupted_run_ends(tmp_path, tiny_llama_dir):
    data = write_jsonl(tmp_path / "bc.jsonl", bc_rows(16))
    cfg = BCConfig(
        data=str(data), base_model=str(tiny_llama_dir), max_steps=10, batch_size=4, learning_rate=3e-3,
        validation_fraction=0, max_length=64, checkpoint_every=4,
    )  # fmt: skip
    whole, again = resume_matches(train_bc, cfg, crash_step=6, resumed_from=4, tmp_path=tmp_path)
    # Same data order and states: the losses after the checkpoint are the uninterrupted run's.
    assert losses(again.history) == pytest.approx(losses(whole.history), abs=1e-4)
    assert again.metrics["train_loss"] == pytest.approx(whole.metrics["train_loss"], abs=1e-4)
    assert_same_weights(
        AutoModelForCausalLM.from_pretrained(tmp_path / "whole"),
        AutoModelForCausalLM.from_pretrained(tmp_path / "cut"),
        tolerance=1e-5,
    )


def test_a_reward_model_run_resumed_after_a_crash_ends_where_the_uninterrupted_run_ends(
    tmp_path, tiny_bert_dir
):
    data = write_jsonl(tmp_path / "rm.jsonl", citing_pairs(48))
    cfg = RMConfig(
        data=str(data), base_model=str(tiny_bert_dir), max_steps=9, batch_size=4, learning_rate=2e-3,
        eval_every=3, validation_fraction=0.25, max_length=64, checkpoint_every=3,
    )  # fmt: skip
    whole, again = resume_matches(train_reward_model, cfg, crash_step=5, resumed_from=3, tmp_path=tmp_path)
    # Dropout draws from the restored random states: the same masks as the uninterrupted run.
    assert losses(again.history) == pytest.approx(losses(whole.history), abs=1e-4)
    assert again.metrics["eval_accuracy"] == whole.metrics["eval_accuracy"]
    assert again.metrics["eval_loss"] == pytest.approx(whole.metrics["eval_loss"], abs=1e-4)
    assert_same_weights(
        AutoModelForSequenceClassification.from_pretrained(tmp_path / "whole"),
        AutoModelForSequenceClassification.from_pretrained(tmp_path / "cut"),
        tolerance=1e-5,
    )


def test_an_rl_run_resumed_after_a_crash_ends_where_the_uninterrupted_run_ends(tmp_path, rl_model_dirs):
    policy, reward = rl_model_dirs
    cfg = rl_config(tmp_path, policy, reward, steps=4, checkpoint_every=2, learning_rate=1e-3)

    def train(config, hooks=None):
        return train_rl(config, QUESTIONS, hooks)

    whole, again = resume_matches(train, cfg, crash_step=3, resumed_from=2, tmp_path=tmp_path)
    # The episodes of a step are seeded by the step: the resumed run samples and learns what the
    # uninterrupted one did, the KL still measured against the starting policy.
    for key in ("reward_mean", "kl", "loss", "entropy"):
        assert [e[key] for e in again.history] == pytest.approx([e[key] for e in whole.history], abs=1e-5)
    assert_same_weights(
        AutoModelForCausalLM.from_pretrained(tmp_path / "whole"),
        AutoModelForCausalLM.from_pretrained(tmp_path / "cut"),
        tolerance=1e-5,
    )
    # Only the latest checkpoint is kept, the reference beside it once.
    kept = sorted(p.name for p in (tmp_path / "cut-state").iterdir())
    assert kept == ["checkpoint-2", state.REFERENCE]
