"""The real default models, with the network cut: SmolLM2 converted from the GGUF in its wheel, loaded,
generating and taking a training step; all-MiniLM-L6-v2 from its wheel taking a reward-model step."""

from __future__ import annotations

import json
import socket

import pytest
import torch

from tests.test_training import bc_rows, citing_pairs
from training.runs.bc import load_policy, train_bc
from training.runs.config import MINILM, SMOLLM2, BCConfig, RMConfig
from training.runs.reward import load_reward_model, score, train_reward_model
from training.runs.store import resolve_base_model


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve a host name or open an internet socket fails the test."""
    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"network access attempted: {address}")
        return real_connect(self, address)

    def resolve(*args, **kwargs):
        raise AssertionError(f"DNS lookup attempted: {args[0]}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the guard must hold without the variable too


def test_smollm2_converts_generates_and_trains_offline(tmp_path, no_network):
    store = tmp_path / "store"
    folder = resolve_base_model(SMOLLM2, store)
    assert folder == store / "base" / SMOLLM2 and (folder / "model.safetensors").is_file()
    assert resolve_base_model(SMOLLM2, store) == folder  # converted once, then reused
    model, tokenizer = load_policy(folder)
    assert model.config.model_type == "llama" and model.dtype == torch.float32
    prompt = tokenizer("The capital of France is", return_tensors="pt")
    out = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0])  # real weights, not a random model
    data = tmp_path / "bc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in bc_rows(2)))
    cfg = BCConfig(
        data=str(data),
        output_dir=str(tmp_path / "bc"),
        base_model=SMOLLM2,
        max_steps=1,
        batch_size=2,
        max_length=96,
        validation_fraction=0,
    )
    result = train_bc(cfg, store=store)
    assert result.steps == 1 and 0 < result.metrics["train_loss"] < 20


def test_minilm_reward_model_step_offline(tmp_path, no_network):
    data = tmp_path / "rm.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in citing_pairs(4)))
    cfg = RMConfig(
        data=str(data), output_dir=str(tmp_path / "rm"), base_model=MINILM, max_steps=1, validation_fraction=0
    )
    result = train_reward_model(cfg, store=tmp_path / "store")
    assert result.steps == 1 and (tmp_path / "rm" / "reward.json").is_file()
    # What was saved is the real MiniLM (6 layers of 384) with the scalar head, and it scores.
    model, tokenizer = load_reward_model(tmp_path / "rm")
    assert (model.config.num_hidden_layers, model.config.hidden_size, model.config.num_labels) == (6, 384, 1)
    rewards = score(model, tokenizer, ["Question: why?\n\nAnswer:"] * 2, [" Because [1].", " Because."], 64)
    assert len(rewards) == 2 and rewards[0] != rewards[1]
