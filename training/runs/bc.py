"""Behaviour cloning: supervised fine-tuning of a causal LM on ``bc-pairs`` (observation -> command,
answer prompt -> answer), the loss on the completion tokens only (WebGPT section 3.2).

Built on transformers' ``Trainer`` (cosine schedule, accumulation, checkpoints, early stopping, devices)
with our own tokenization, because TRL's SFTTrainer cuts long examples from the end (losing the
completion) and silently drops examples left with no supervised token; here prompts are cut in the
middle and every example keeps its completion. ``bench/bench_training.py`` compares it with SFTTrainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

from training.runs.config import BCConfig
from training.runs.data import bc_examples, cut_middle, held_out_split, question_key, read_rows
from training.runs.hooks import Hooks, RunResult
from training.runs.runtime import fit, run_result, save_model, start, with_lora
from training.runs.store import default_store, resolve_base_model

IGNORE = -100  # label of tokens that carry no loss


def encode_example(tokenizer: Any, prompt: str, completion: str, max_length: int) -> dict[str, list[int]]:
    """``prompt + completion + eos`` in at most ``max_length`` tokens, labels on the completion only.
    The completion keeps at least 3/4 of the room; the prompt is cut in the middle."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    prompt_ids, completion_ids = fit_to_length(prompt_ids, completion_ids, max_length)
    return {
        "input_ids": prompt_ids + completion_ids,
        "labels": [IGNORE] * len(prompt_ids) + completion_ids,
    }


def fit_to_length(
    prompt_ids: list[int], completion_ids: list[int], max_length: int
) -> tuple[list[int], list[int]]:
    """(prompt, completion) in at most ``max_length`` tokens: the completion keeps at least 3/4 of the
    room, the prompt is cut in the middle (its head and its latest part both matter)."""
    completion_ids = completion_ids[: max(1, max_length - min(len(prompt_ids), max_length // 4))]
    return cut_middle(prompt_ids, max_length - len(completion_ids)), completion_ids


class PadCollator:
    """Right-pads a batch: pad id for inputs, no loss for padding."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, batch: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(example["input_ids"]) for example in batch)
        ids, labels, mask = [], [], []
        for example in batch:
            gap = width - len(example["input_ids"])
            ids.append(example["input_ids"] + [self.pad_id] * gap)
            labels.append(example["labels"] + [IGNORE] * gap)
            mask.append([1] * len(example["input_ids"]) + [0] * gap)
        return {
            "input_ids": torch.tensor(ids),
            "labels": torch.tensor(labels),
            "attention_mask": torch.tensor(mask),
        }


class CompletionTrainer(Trainer):
    """``Trainer`` whose loss projects onto the vocabulary only the positions that predict a completion
    token (``logits_to_keep`` as a mask): a browsing prompt is ~95% of the tokens, and the 49k-word output
    layer over every position costs a fifth of the step and the largest activation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loss_is_scaled_for_ga = False  # a mean per batch: the Trainer divides by accumulation

    def compute_loss(
        self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False, **kwargs: Any
    ) -> Any:
        targets = inputs["labels"][:, 1:]
        predicts = torch.zeros_like(inputs["labels"], dtype=torch.bool)
        predicts[:, :-1] = targets != IGNORE  # position t predicts token t + 1
        outputs = model(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], logits_to_keep=predicts
        )
        loss = F.cross_entropy(outputs.logits.float(), targets[targets != IGNORE])
        return (loss, outputs) if return_outputs else loss


def load_policy(path: Path) -> tuple[Any, Any]:
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def train_bc(cfg: BCConfig, hooks: Hooks | None = None, store: Path | None = None) -> RunResult:
    """Fine-tune ``cfg.base_model`` on ``cfg.data``; the model goes to ``cfg.output_dir``. ``store`` is the
    model store (for the converted SmolLM2), MODEL_STORE_DIR by default."""
    hooks = start(cfg, hooks)
    base_path = resolve_base_model(cfg.base_model, store or default_store())
    rows = bc_examples(read_rows(cfg.data))
    train_rows, validation_rows = held_out_split(rows, question_key, cfg.validation_fraction, cfg.seed)
    if not train_rows:
        raise ValueError("no training examples: the export is empty")
    model, tokenizer = load_policy(base_path)
    if cfg.lora_rank:
        model = with_lora(model, cfg.lora_rank, "CAUSAL_LM")
    datasets = tuple(
        [encode_example(tokenizer, row["prompt"], row["completion"], cfg.max_length) for row in part]
        for part in (train_rows, validation_rows)
    )
    collator = PadCollator(tokenizer.pad_token_id)
    trainer, bridge, metrics = fit(CompletionTrainer, cfg, model, tokenizer, datasets, collator, hooks)
    if not bridge.cancelled and trainer.is_world_process_zero():
        summary = {"kind": "bc", "config": cfg.to_dict(), "base_model": str(base_path), "metrics": metrics}
        save_model(trainer.model, tokenizer, Path(cfg.output_dir), summary)
    return run_result(cfg, trainer, bridge, metrics, (len(train_rows), len(validation_rows)))
