"""Reward models: a backbone with a scalar head, trained so that r(preferred) - r(other) predicts the
labelers' preference: loss -log sigmoid(r_i - r_j) with soft targets (0.5 for ties), "better" and
"much better" collapsed as in WebGPT. A K-way ranking is one batch element over all its K-choose-2 pairs
(InstructGPT), so one ranking weighs as much as one pair. After training, the mean reward of human
demonstrations is subtracted (WebGPT's offset) when the data contains any.

Built on transformers' ``Trainer`` with a ``compute_loss`` of our own: TRL's RewardTrainer has no soft
targets for ties and silently drops pairs longer than ``max_length``; here prompts are cut in the middle.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer

from training.runs.config import RMConfig
from training.runs.data import Comparison, comparisons, cut_middle, held_out_split, read_rows
from training.runs.hooks import Hooks, RunResult
from training.runs.metrics import preference_metrics
from training.runs.runtime import fit, report_validation, run_result, save_model, start, with_lora
from training.runs.store import default_store, resolve_base_model

OFFSET_FILE = "reward.json"


def load_reward_model(path: Path) -> tuple[Any, Any]:
    """A scalar-head model (a new head on a plain backbone; the trained one on a reward checkpoint)."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def reward_offset(path: Path) -> float:
    offset_file = Path(path) / OFFSET_FILE
    return json.loads(offset_file.read_text())["offset"] if offset_file.is_file() else 0.0


def encode_answer(tokenizer: Any, prompt: str, answer: str, max_length: int) -> list[int]:
    """One scored sequence. Encoders get ``[CLS] prompt [SEP] answer [SEP]``; decoders ``prompt answer
    eos`` (the head reads the last token). The answer keeps up to 3/4 of the room, the prompt the rest."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    encoder = tokenizer.cls_token_id is not None and tokenizer.sep_token_id is not None
    specials = 3 if encoder else 1
    answer_ids = answer_ids[: max(1, (max_length - specials) * 3 // 4)]
    prompt_ids = cut_middle(prompt_ids, max_length - specials - len(answer_ids))
    if encoder:
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        return [cls, *prompt_ids, sep, *answer_ids, sep]
    return [*prompt_ids, *answer_ids, tokenizer.eos_token_id]


def pad(sequences: Sequence[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(s) for s in sequences)
    return {
        "input_ids": torch.tensor([list(s) + [pad_id] * (width - len(s)) for s in sequences]),
        "attention_mask": torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences]),
    }


class ComparisonCollator:
    """A batch of comparisons -> every answer once, and the pairs as index tensors with a weight of
    1 / (pairs in its comparison) / (comparisons in the batch)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        sequences, left, right, targets, weights = [], [], [], [], []
        for example in batch:
            base = len(sequences)
            sequences.extend(example["sequences"])
            for i, j, target in example["pairs"]:
                left.append(base + i)
                right.append(base + j)
                targets.append(target)
                weights.append(1 / len(example["pairs"]) / len(batch))
        return pad(sequences, self.pad_id) | {
            "left": torch.tensor(left),
            "right": torch.tensor(right),
            "targets": torch.tensor(targets, dtype=torch.float32),
            "weights": torch.tensor(weights, dtype=torch.float32),
        }


def preference_loss(
    rewards: torch.Tensor,
    left: torch.Tensor,
    right: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """Weighted binary cross-entropy of sigmoid(r_left - r_right) against the (soft) targets."""
    logits = rewards[left] - rewards[right]
    losses = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    return (losses * weights).sum()


def score(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    answers: Sequence[str],
    max_length: int,
    batch: int = 16,
) -> list[float]:
    """Raw rewards (without the offset) of answers to their prompts, in batches, no gradients."""
    model.eval()
    device = next(model.parameters()).device
    rewards: list[float] = []
    with torch.no_grad():
        for start in range(0, len(answers), batch):
            sequences = [
                encode_answer(tokenizer, p, a, max_length)
                for p, a in zip(prompts[start : start + batch], answers[start : start + batch], strict=True)
            ]
            inputs = {k: v.to(device) for k, v in pad(sequences, tokenizer.pad_token_id).items()}
            rewards.extend(model(**inputs).logits.squeeze(-1).float().tolist())
    return rewards


def comparison_metrics(
    model: Any, tokenizer: Any, items: Sequence[Comparison], max_length: int
) -> dict[str, Any]:
    """Accuracy (95% CI), log-loss and calibration of the model's rewards on ``items``."""
    prompts = [p for item in items for p in item.prompts]
    answers = [a for item in items for a in item.answers]
    rewards, differences, targets, start = score(model, tokenizer, prompts, answers, max_length), [], [], 0
    for item in items:
        for i, j, target in item.pairs:
            differences.append(rewards[start + i] - rewards[start + j])
            targets.append(target)
        start += len(item.answers)
    return preference_metrics(differences, targets)


class PreferenceTrainer(Trainer):
    """``Trainer`` with the pairwise loss, and validation reporting accuracy and log-loss."""

    def __init__(self, *args: Any, validation: Sequence[Comparison], max_length: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.validation, self.max_length = list(validation), max_length
        self.loss_is_scaled_for_ga = False  # our loss is a mean: let the Trainer divide by accumulation

    def compute_loss(
        self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False, **kwargs: Any
    ) -> Any:
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        rewards = outputs.logits.squeeze(-1).float()
        loss = preference_loss(rewards, inputs["left"], inputs["right"], inputs["targets"], inputs["weights"])
        return (loss, outputs) if return_outputs else loss

    def evaluate(self, *args: Any, metric_key_prefix: str = "eval", **kwargs: Any) -> dict[str, float]:
        found = comparison_metrics(self.model, self.processing_class, self.validation, self.max_length)
        metrics = {
            f"{metric_key_prefix}_loss": found["log_loss"],
            f"{metric_key_prefix}_accuracy": found["accuracy"],
            f"{metric_key_prefix}_accuracy_low": found["accuracy_ci95"][0],
            f"{metric_key_prefix}_accuracy_high": found["accuracy_ci95"][1],
        }
        return report_validation(self, metrics)


def train_reward_model(cfg: RMConfig, hooks: Hooks | None = None, store: Path | None = None) -> RunResult:
    """Train ``cfg.base_model`` with a scalar head on ``cfg.data``; the model goes to ``cfg.output_dir``."""
    hooks = start(cfg, hooks)
    items = comparisons(read_rows(cfg.data))
    train_items, validation_items = held_out_split(
        items, lambda c: c.question, cfg.validation_fraction, cfg.seed
    )
    if not train_items:
        raise ValueError("no training comparisons: the export is empty")
    base_path = resolve_base_model(cfg.base_model, store or default_store())
    model, tokenizer = load_reward_model(base_path)
    if cfg.lora_rank:
        model = with_lora(model, cfg.lora_rank, "SEQ_CLS")

    def encode(item: Comparison) -> dict[str, Any]:
        sequences = [
            encode_answer(tokenizer, p, a, cfg.max_length)
            for p, a in zip(item.prompts, item.answers, strict=True)
        ]
        return {"sequences": sequences, "pairs": item.pairs}

    datasets = ([encode(item) for item in train_items], [encode(item) for item in validation_items])
    collator = ComparisonCollator(tokenizer.pad_token_id)
    options = {"validation": validation_items, "max_length": cfg.max_length}
    trainer, bridge, metrics = fit(
        PreferenceTrainer, cfg, model, tokenizer, datasets, collator, hooks, **options
    )
    if not bridge.cancelled and trainer.is_world_process_zero():  # one process saves
        model = trainer.model.merge_and_unload() if cfg.lora_rank else trainer.model
        offset = demonstration_offset(model, tokenizer, items, set(cfg.demonstration_answer_ids), cfg)
        metrics["reward_offset"] = offset
        summary = {"kind": "rm", "config": cfg.to_dict(), "base_model": str(base_path), "metrics": metrics}
        save_model(model, tokenizer, Path(cfg.output_dir), summary)
        (Path(cfg.output_dir) / OFFSET_FILE).write_text(json.dumps({"offset": offset}) + "\n")
    return run_result(cfg, trainer, bridge, metrics, (len(train_items), len(validation_items)))


def demonstration_offset(
    model: Any, tokenizer: Any, items: Sequence[Comparison], demonstration_ids: set[int], cfg: RMConfig
) -> float:
    """The mean raw reward of the human demonstrations among the answers (0 when there are none)."""
    seen: dict[int, tuple[str, str]] = {}
    for item in items:
        for answer_id, prompt, answer in zip(item.answer_ids, item.prompts, item.answers, strict=True):
            if answer_id in demonstration_ids:
                seen[answer_id] = (prompt, answer)
    if not seen:
        return 0.0
    prompts, answers = zip(*seen.values(), strict=True)
    rewards = score(model, tokenizer, prompts, answers, cfg.max_length)
    return sum(rewards) / len(rewards)
