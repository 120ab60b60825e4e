"""The trainers on tiny random models with the real tokenizers: losses fall, a reward model learns a
preference, ties are soft targets, K-way groups make every pair, splits hold, cancelling stops (and
keeps a model whose last step was done)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from annotation.feedback.agreement import wilson_interval
from training.runs.bc import IGNORE, encode_example, train_bc
from training.runs.config import BCConfig, RMConfig
from training.runs.data import comparisons, cut_middle, held_out_split, ranked_pairs
from training.runs.hooks import Hooks
from training.runs.metrics import preference_metrics
from training.runs.reward import (
    ComparisonCollator,
    load_reward_model,
    preference_loss,
    reward_offset,
    score,
    train_reward_model,
)

WORDS = [
    "river",
    "bridge",
    "castle",
    "winter",
    "harbour",
    "signal",
    "market",
    "garden",
    "tower",
    "orbit",
    "lantern",
    "meadow",
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def bc_rows(questions: int = 30) -> list[dict]:
    """Browsing-like steps: the command to learn follows from the question's words."""
    rng = random.Random(1)  # noqa: S311 (test data)
    rows = []
    for q in range(questions):
        topic = " ".join(rng.sample(WORDS, 2))
        prompt = f"Question: where is the {topic}?\nQuotes: none\nActions left: 99\nNext action:"
        rows.append({"question_id": q, "step": 0, "prompt": prompt, "completion": f" Search {topic}"})
        rows.append({"question_id": q, "step": 1, "prompt": prompt + " Search", "completion": " Quote: it"})
    return rows


def citing_pairs(questions: int, seed: int = 0) -> list[dict]:
    """Synthetic preference: an answer that cites a quote ("[1]") beats the same answer without."""
    rng = random.Random(seed)  # noqa: S311 (test data)
    rows = []
    for q in range(questions):
        text = " ".join(rng.choices(WORDS, k=8)).capitalize()
        prompt = (
            f"Question: what about the {rng.choice(WORDS)}?\n\nQuotes:\n[1] {rng.choice(WORDS)}\n\nAnswer:"
        )
        rows.append(
            {
                "question_id": q,
                "prompt_chosen": prompt,
                "chosen": f" {text} [1].",
                "prompt_rejected": prompt,
                "rejected": f" {text}.",
                "label": 1.0,
                "margin": 1.0,
                "answer_chosen": 2 * q,
                "answer_rejected": 2 * q + 1,
            }
        )
    return rows


def test_a_bc_example_keeps_its_completion_and_cuts_the_prompt_in_the_middle(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    prompt = "Question: why? " + "filler " * 400 + "Next action:"
    example = encode_example(tokenizer, prompt, " Search: rivers", max_length=64)
    completion = tokenizer(" Search: rivers", add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id
    ]
    assert len(example["input_ids"]) == 64
    assert example["input_ids"][-len(completion) :] == completion
    supervised = [t for t in example["labels"] if t != IGNORE]
    assert supervised == completion  # the loss sees the completion only
    text = tokenizer.decode(example["input_ids"])
    assert text.startswith("Question: why?") and "Next action:" in text  # head and tail of the prompt kept
    assert cut_middle(list(range(10)), 4) == [0, 7, 8, 9]


def test_behaviour_cloning_lowers_the_loss_and_saves_a_loadable_model(tmp_path, tiny_llama_dir):
    data = write_jsonl(tmp_path / "bc.jsonl", bc_rows())
    seen = []
    cfg = BCConfig(
        data=str(data),
        output_dir=str(tmp_path / "bc-model"),
        base_model=str(tiny_llama_dir),
        max_steps=24,
        batch_size=8,
        learning_rate=3e-3,
        eval_every=8,
        validation_fraction=0.2,
        max_length=64,
    )
    result = train_bc(cfg, Hooks(on_progress=lambda step, total, logs: seen.append((step, total, logs))))
    losses = [logs["loss"] for _, _, logs in seen if "loss" in logs]
    validation = [logs["eval_loss"] for _, _, logs in seen if "eval_loss" in logs]
    assert result.steps == 24 and not result.cancelled
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 1.0  # a random model starts near ln(49152) ≈ 10.8
    assert validation[-1] < validation[0]
    assert result.validation_examples > 0 and result.train_examples + result.validation_examples == 60
    assert {total for _, total, _ in seen} == {24}
    model = AutoModelForCausalLM.from_pretrained(result.output_dir)
    assert model.config.num_hidden_layers == 2
    summary = json.loads((Path(result.output_dir) / "training.json").read_text())
    assert summary["kind"] == "bc" and summary["metrics"]["eval_loss"] == pytest.approx(validation[-1])


def test_a_reward_model_learns_that_citing_answers_are_better(tmp_path, tiny_bert_dir):
    data = write_jsonl(tmp_path / "rm.jsonl", citing_pairs(160))
    cfg = RMConfig(
        data=str(data),
        output_dir=str(tmp_path / "rm-model"),
        base_model=str(tiny_bert_dir),
        max_steps=40,
        batch_size=8,
        learning_rate=2e-3,
        eval_every=10,
        validation_fraction=0.25,
        max_length=64,
        demonstration_answer_ids=[0, 2, 4, 6],
    )
    result = train_reward_model(cfg)
    assert result.validation_examples >= 20
    assert result.metrics["eval_accuracy"] > 0.9
    assert result.metrics["eval_loss"] < math.log(2)  # it learned a margin, not just a sign
    low, high = result.metrics["eval_accuracy_low"], result.metrics["eval_accuracy_high"]
    assert low < result.metrics["eval_accuracy"] <= high
    # The offset makes the demonstrations (here the citing answers 0, 2, 4, 6) score 0 on average.
    assert reward_offset(Path(result.output_dir)) == pytest.approx(result.metrics["reward_offset"])
    assert result.metrics["reward_offset"] != 0
    # The saved model, loaded as sampling and evaluation load it, prefers citing answers it never saw.
    model, tokenizer = load_reward_model(Path(result.output_dir))
    unseen = citing_pairs(20, seed=7)
    prompts = [row["prompt_chosen"] for row in unseen]
    chosen = score(model, tokenizer, prompts, [row["chosen"] for row in unseen], 64)
    rejected = score(model, tokenizer, prompts, [row["rejected"] for row in unseen], 64)
    assert sum(c > r for c, r in zip(chosen, rejected, strict=True)) >= 18


def test_ties_are_soft_targets_and_rankings_make_every_pair():
    assert ranked_pairs([2, 1, 1, 3]) == [
        (1, 0, 1.0),
        (2, 0, 1.0),
        (0, 3, 1.0),
        (1, 2, 0.5),
        (1, 3, 1.0),
        (2, 3, 1.0),
    ]
    group = {"question_id": 1, "prompts": ["p"] * 4, "answers": list("abcd"), "ranks": [1, 2, 2, 4]}
    tie = citing_pairs(1)[0] | {"label": 0.5}
    items = comparisons([group, tie])
    assert len(items[0].pairs) == math.comb(4, 2)
    assert items[1].pairs == [(0, 1, 0.5)]
    batch = ComparisonCollator(pad_id=0)(
        [
            {"sequences": [[1], [2], [3], [4]], "pairs": items[0].pairs},
            {"sequences": [[5], [6]], "pairs": [(0, 1, 0.5)]},
        ]
    )
    assert batch["input_ids"].shape == (6, 1)
    assert batch["targets"].tolist() == [1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 0.5]
    assert batch["left"].tolist()[-1] == 4 and batch["right"].tolist()[-1] == 5  # offsets into the batch
    # A group weighs as much as a pair: 6 pairs at 1/12 each, one pair at 1/2.
    assert batch["weights"].sum().item() == pytest.approx(1.0)
    assert batch["weights"][-1].item() == pytest.approx(0.5)
    # A tie's loss is smallest when both rewards are equal: no push either way.
    rewards = torch.tensor([0.0, 0.0], requires_grad=True)
    loss = preference_loss(
        rewards, torch.tensor([0]), torch.tensor([1]), torch.tensor([0.5]), torch.tensor([1.0])
    )
    loss.backward()
    assert loss.item() == pytest.approx(math.log(2))
    assert rewards.grad.abs().sum().item() == pytest.approx(0.0)


def test_bad_rows_are_refused_with_their_row_number():
    with pytest.raises(ValueError, match=r"row 2: label must be 1 or 0\.5"):
        comparisons([citing_pairs(1)[0], citing_pairs(1)[0] | {"label": 0.7}])
    with pytest.raises(ValueError, match="row 1: not an rm-pairs or rm-groups row"):
        comparisons([{"prompt": "p", "completion": "c"}])


def test_the_validation_split_keeps_each_question_on_one_side():
    rows = [{"question_id": q, "step": s} for q in range(200) for s in range(3)]
    train, validation = held_out_split(rows, lambda r: str(r["question_id"]), 0.1, seed=3)
    assert {r["question_id"] for r in train}.isdisjoint({r["question_id"] for r in validation})
    assert 5 < len({r["question_id"] for r in validation}) < 40
    assert held_out_split(rows, lambda r: str(r["question_id"]), 0.1, seed=3) == (train, validation)
    two = [{"question_id": 1}, {"question_id": 2}]
    train, validation = held_out_split(two, lambda r: str(r["question_id"]), 0.04)
    assert len(train) == len(validation) == 1  # at least one question on each side


def test_a_one_question_export_always_trains():
    """Whatever its id, a lone question is trained on: held out, it left "the export is empty" for about
    one id in ten (the reward model's 0.1), which failed a worker test by the database's sequence."""
    for question_id in range(200):
        rows = [{"question_id": question_id, "step": s} for s in range(2)]
        assert held_out_split(rows, lambda r: str(r["question_id"]), 0.1) == (rows, [])


def test_cancelling_stops_after_the_step_and_saves_nothing(tmp_path, tiny_llama_dir):
    data = write_jsonl(tmp_path / "bc.jsonl", bc_rows(10))
    cfg = BCConfig(
        data=str(data),
        output_dir=str(tmp_path / "out"),
        base_model=str(tiny_llama_dir),
        max_steps=50,
        max_length=64,
    )
    result = train_bc(cfg, Hooks(should_stop=lambda: True))
    assert result.cancelled and result.steps == 1
    assert not (tmp_path / "out").exists()


def test_a_cancel_read_at_the_last_step_keeps_the_finished_model(tmp_path, tiny_llama_dir):
    """Issue 23: the last step's stop check marked a finished run cancelled and its model was not saved.
    A cancel asked for during the last step finds nothing left to stop."""
    data = write_jsonl(tmp_path / "bc.jsonl", bc_rows(10))
    cfg = BCConfig(
        data=str(data),
        output_dir=str(tmp_path / "out"),
        base_model=str(tiny_llama_dir),
        max_steps=2,
        max_length=64,
    )
    asked = iter([False])  # the cancel comes during step 2, the last
    result = train_bc(cfg, Hooks(should_stop=lambda: next(asked, True)))
    assert not result.cancelled and result.steps == 2
    assert (tmp_path / "out" / "training.json").exists()


def test_lora_adapters_are_merged_into_a_plain_model(tmp_path, tiny_llama_dir):
    data = write_jsonl(tmp_path / "bc.jsonl", bc_rows(6))
    cfg = BCConfig(
        data=str(data),
        output_dir=str(tmp_path / "lora"),
        base_model=str(tiny_llama_dir),
        max_steps=2,
        lora_rank=4,
        validation_fraction=0,
        max_length=64,
    )
    train_bc(cfg)
    files = {p.name for p in (tmp_path / "lora").iterdir()}
    assert "model.safetensors" in files and "adapter_config.json" not in files
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora").state_dict()
    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir).state_dict()
    assert merged.keys() == base.keys()  # the base model's own weights, no adapter left over
    # The trained adapters were folded into the linear layers they adapt.
    changed = {name for name in base if not torch.equal(merged[name], base[name])}
    assert "model.layers.0.self_attn.q_proj.weight" in changed and "model.embed_tokens.weight" not in changed


def test_impossible_settings_are_named():
    with pytest.raises(ValueError, match=r"^learning_rate: must be more than 0 and less than 1, not 5$"):
        BCConfig(data="x", output_dir="y", learning_rate=5).check()
    with pytest.raises(ValueError, match=r"^epochs or max_steps: one must be positive$"):
        BCConfig(data="x", output_dir="y", epochs=0, max_steps=-1).check()
    BCConfig(data="x", output_dir="y", epochs=0, max_steps=1).check()  # max_steps alone is enough
    with pytest.raises(ValueError, match="unknown setting"):
        BCConfig.from_dict({"learning_rat": 1e-4})


def test_preference_metrics_give_a_wilson_interval_and_calibration():
    found = preference_metrics([2.0, 1.0, -1.0, 0.0], [1.0, 1.0, 1.0, 0.5])
    assert found["accuracy"] == pytest.approx(2 / 3)  # the tie is not counted
    assert found["accuracy_ci95"] == list(wilson_interval(2, 3))
    assert found["decided_pairs"] == 3 and found["pairs"] == 4
    assert sum(b["count"] for b in found["calibration"]) == 8  # each pair both ways round
    assert all(0 <= b["predicted"] <= 1 and 0 <= b["observed"] <= 1 for b in found["calibration"])


def test_settings_of_the_wrong_type_are_refused_by_name():
    with pytest.raises(ValueError, match="max_steps: expected int"):
        BCConfig.from_dict({"max_steps": "10"})
    with pytest.raises(ValueError, match="lora_rank: expected int"):
        BCConfig.from_dict({"lora_rank": True})
    with pytest.raises(ValueError, match="learning_rate: expected float"):
        RMConfig.from_dict({"learning_rate": float("nan")})
    assert BCConfig.from_dict({"epochs": 2}).epochs == 2.0 and isinstance(
        BCConfig.from_dict({"epochs": 2}).epochs, float
    )


def test_early_stopping_ends_a_run_whose_validation_loss_stops_improving(tmp_path, tiny_llama_dir):
    data = write_jsonl(tmp_path / "bc.jsonl", bc_rows(12))
    cfg = BCConfig(
        data=str(data),
        output_dir=str(tmp_path / "early"),
        base_model=str(tiny_llama_dir),
        max_steps=20,
        learning_rate=1e-12,  # the validation loss cannot improve
        eval_every=1,
        early_stopping_patience=2,
        validation_fraction=0.3,
        max_length=64,
    )
    result = train_bc(cfg)
    assert result.steps == 3 and not result.cancelled  # best at step 1, then two validations without gain
    assert (tmp_path / "early" / "model.safetensors").is_file()
