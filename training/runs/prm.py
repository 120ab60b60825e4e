"""Process reward models (issue 38, groundwork): a backbone with a scalar head that scores one browsing action
given the observation it was taken on, trained on labelers' step labels (annotation/feedback/steps.py).

- **Step ratings** (PRM800K): each rated step is one example, learned pointwise: the loss is the binary
  cross-entropy of sigmoid(score) against good 1, neutral 0.5 (a soft target: neither helps nor hurts),
  bad 0, so sigmoid(score) reads as the chance the step is good.
- **Step preferences** (Web-Shepherd): two candidate actions at one state, learned pairwise as the reward
  model learns answers (``preference_loss``): "better" and "much better" collapse to 1, "equally good" is
  0.5 (WebGPT).

``labels`` chooses ratings, preferences or both (the two losses added, each a mean over its examples in the
batch). Held out by question, like every kind. Validation reports the step-level accuracy on the good and
bad steps (the score's sign; neutral steps do not count), the first-bad-step accuracy (PRM800K's use of a
PRM: a labeler's sequence of steps, the first one scored below 0.5 against the step they marked first bad,
none against none), and the preference accuracy where there are preferences.

Rows (the ``step-labels`` format the export will write, made by ``annotation.feedback.steps.rating_rows``
and ``preference_row``; JSONL or Parquet, one labeler's label a row; ``reason`` and ``note`` ride along):

    {"kind": "rating", "question_id": 7, "episode_id": 3, "labeler": "ann", "step": 2,
     "observation": "...", "action": "Clicked on link 4", "rating": "bad", "first_bad": 2}
    {"kind": "preference", "question_id": 7, "episode_id": 3, "labeler": "ann", "step": 2,
     "observation": "...", "action_a": "Search ...", "action_b": "Back", "preference": "a_better"}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import Trainer

from annotation.feedback.agreement import wilson_interval
from training.runs.config import PRMConfig
from training.runs.data import Row, held_out_split, read_rows
from training.runs.hooks import Hooks, RunResult
from training.runs.reward import encode_answer, load_reward_model, pad, preference_loss, score
from training.runs.runtime import fit, report_validation, run_result, save_model, start, with_lora
from training.runs.store import default_store, resolve_base_model

RATING_TARGETS = {"good": 1.0, "neutral": 0.5, "bad": 0.0}
PREFERENCE_TARGETS = {
    "a_much_better": 1.0,
    "a_better": 1.0,
    "equal": 0.5,
    "b_better": 0.0,
    "b_much_better": 0.0,
}


@dataclass(frozen=True)
class Rated:
    """One labeler's rating of one step."""

    question: str
    sequence: tuple[Any, ...]  # (episode, labeler): the steps one labeler rated, in order
    step: int
    observation: str
    action: str
    rating: str
    first_bad: int | None


@dataclass(frozen=True)
class Preferred:
    """One labeler's preference between two candidate actions at one state (target: P(a better))."""

    question: str
    observation: str
    actions: tuple[str, str]
    target: float


@dataclass
class StepData:
    ratings: list[Rated] = field(default_factory=list)
    preferences: list[Preferred] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ratings) + len(self.preferences)


def step_labels(rows: Sequence[Row], labels: str = "both") -> StepData:
    """The rows as examples (those ``labels`` asks for); a row that is not a step label is a ValueError
    naming its line."""
    data = StepData()
    for number, row in enumerate(rows, start=1):
        kind = row.get("kind")
        question = str(row.get("question_id", row.get("episode_id", "")))
        try:
            if kind == "rating":
                if row["rating"] not in RATING_TARGETS:
                    raise ValueError(f"rating must be one of {', '.join(RATING_TARGETS)}")
                first_bad = None if row.get("first_bad") is None else int(row["first_bad"])
                sequence = (row["episode_id"], row.get("labeler"))
                rated = Rated(question, sequence, int(row["step"]), str(row["observation"]),
                              str(row["action"]), row["rating"], first_bad)  # fmt: skip
                if labels != "preferences":
                    data.ratings.append(rated)
            elif kind == "preference":
                if row["preference"] not in PREFERENCE_TARGETS:
                    raise ValueError(f"preference must be one of {', '.join(PREFERENCE_TARGETS)}")
                preferred = Preferred(question, str(row["observation"]),
                                      (str(row["action_a"]), str(row["action_b"])),
                                      PREFERENCE_TARGETS[row["preference"]])  # fmt: skip
                if labels != "ratings":
                    data.preferences.append(preferred)
            else:
                raise ValueError("not a step label (kind must be rating or preference)")
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"row {number}: {what}") from None
    return data


def split(data: StepData, fraction: float, seed: int) -> tuple[StepData, StepData]:
    """(train, validation), every label of a question on one side (``held_out_split``)."""
    examples: list[Rated | Preferred] = [*data.ratings, *data.preferences]
    train, held = held_out_split(examples, lambda example: example.question, fraction, seed)

    def sorted_out(examples: list[Rated | Preferred]) -> StepData:
        return StepData(
            [e for e in examples if isinstance(e, Rated)], [e for e in examples if isinstance(e, Preferred)]
        )

    return sorted_out(train), sorted_out(held)


class StepCollator:
    """A batch of encoded examples -> every sequence once; the rated ones as (index, target), the preferred
    pairs as (left, right, target)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        sequences: list[list[int]] = []
        rated, rated_targets, left, right, pair_targets = [], [], [], [], []
        for example in batch:
            base = len(sequences)
            sequences.extend(example["sequences"])
            if example["kind"] == "rating":
                rated.append(base)
                rated_targets.append(example["target"])
            else:
                left.append(base)
                right.append(base + 1)
                pair_targets.append(example["target"])
        return pad(sequences, self.pad_id) | {
            "rated": torch.tensor(rated, dtype=torch.long),
            "rated_targets": torch.tensor(rated_targets, dtype=torch.float32),
            "left": torch.tensor(left, dtype=torch.long),
            "right": torch.tensor(right, dtype=torch.long),
            "pair_targets": torch.tensor(pair_targets, dtype=torch.float32),
        }


def step_loss(scores: torch.Tensor, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The mean pointwise loss of the rated steps plus the mean pairwise loss of the preferences."""
    loss = scores.new_zeros(())
    if len(inputs["rated"]):
        loss = loss + F.binary_cross_entropy_with_logits(scores[inputs["rated"]], inputs["rated_targets"])
    pairs = len(inputs["left"])
    if pairs:
        weights = torch.full((pairs,), 1 / pairs, device=scores.device)
        loss = loss + preference_loss(
            scores, inputs["left"], inputs["right"], inputs["pair_targets"], weights
        )
    return loss


def step_metrics(scores: Sequence[float], data: StepData, pair_scores: Sequence[tuple[float, float]]) -> dict:
    """Validation figures from the scores of ``data.ratings`` (in order) and of each preference's two
    actions: step-level accuracy (good and bad steps), first-bad-step accuracy (per labeler's sequence),
    preference accuracy; each with its count and a 95% Wilson interval."""
    decided = [(s, r.rating) for s, r in zip(scores, data.ratings, strict=True) if r.rating != "neutral"]
    step_right = sum((s > 0) == (rating == "good") for s, rating in decided)
    sequences: dict[tuple[Any, ...], list[tuple[int, float, int | None]]] = {}
    for s, r in zip(scores, data.ratings, strict=True):
        sequences.setdefault(r.sequence, []).append((r.step, s, r.first_bad))
    first_right = 0
    for steps in sequences.values():
        steps.sort()
        predicted = next((step for step, s, _ in steps if s < 0), None)  # sigmoid(s) < 0.5
        first_right += predicted == steps[0][2]
    prefer = [
        (a - b, r.target) for (a, b), r in zip(pair_scores, data.preferences, strict=True) if r.target != 0.5
    ]
    prefer_right = sum((difference > 0) == (target > 0.5) for difference, target in prefer)
    return {
        "step_accuracy": _share(step_right, len(decided)),
        "first_bad_accuracy": _share(first_right, len(sequences)),
        "preference_accuracy": _share(prefer_right, len(prefer)),
    }


def _share(right: int, total: int) -> dict[str, Any]:
    low, high = wilson_interval(right, total)
    return {"value": right / total if total else None, "count": total, "ci95": [low, high]}


def score_steps(
    model: Any, tokenizer: Any, data: StepData, max_length: int
) -> tuple[list[float], list[tuple[float, float]]]:
    """The model's scores of every rated step and of both actions of every preference."""
    rated = score(
        model, tokenizer, [r.observation for r in data.ratings], [r.action for r in data.ratings], max_length
    )
    pairs_flat = score(
        model,
        tokenizer,
        [p.observation for p in data.preferences for _ in range(2)],
        [action for p in data.preferences for action in p.actions],
        max_length,
    )
    return rated, list(zip(pairs_flat[::2], pairs_flat[1::2], strict=True))


class StepTrainer(Trainer):
    """``Trainer`` with the step loss, and validation reporting the step-level figures."""

    def __init__(self, *args: Any, validation: StepData, max_length: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.validation, self.max_length = validation, max_length
        self.loss_is_scaled_for_ga = False

    def compute_loss(
        self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False, **kwargs: Any
    ) -> Any:
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        loss = step_loss(outputs.logits.squeeze(-1).float(), inputs)
        return (loss, outputs) if return_outputs else loss

    def evaluate(self, *args: Any, metric_key_prefix: str = "eval", **kwargs: Any) -> dict[str, float]:
        rated, pairs = score_steps(self.model, self.processing_class, self.validation, self.max_length)
        found = step_metrics(rated, self.validation, pairs)
        targets = [RATING_TARGETS[r.rating] for r in self.validation.ratings]
        losses = [F.binary_cross_entropy_with_logits(torch.tensor(s), torch.tensor(t)).item()
                  for s, t in zip(rated, targets, strict=True)]  # fmt: skip
        metrics = {f"{metric_key_prefix}_loss": sum(losses) / len(losses) if losses else float("nan")}
        for name, figure in found.items():
            if figure["value"] is not None:
                metrics[f"{metric_key_prefix}_{name}"] = figure["value"]
        return report_validation(self, metrics)


def train_prm(cfg: PRMConfig, hooks: Hooks | None = None, store: Path | None = None) -> RunResult:
    """Train ``cfg.base_model`` with a scalar head on the step labels in ``cfg.data``."""
    hooks = start(cfg, hooks)
    data = step_labels(read_rows(cfg.data), cfg.labels)
    train, validation = split(data, cfg.validation_fraction, cfg.seed)
    if not len(train):
        raise ValueError(f"no training step labels ({cfg.labels}): the export has none")
    base_path = resolve_base_model(cfg.base_model, store or default_store())
    model, tokenizer = load_reward_model(base_path)
    if cfg.lora_rank:
        model = with_lora(model, cfg.lora_rank, "SEQ_CLS")

    def encode(part: StepData) -> list[dict[str, Any]]:
        rated = [
            {"kind": "rating", "target": RATING_TARGETS[r.rating],
             "sequences": [encode_answer(tokenizer, r.observation, r.action, cfg.max_length)]}
            for r in part.ratings
        ]  # fmt: skip
        preferred = [
            {"kind": "preference", "target": p.target,
             "sequences": [encode_answer(tokenizer, p.observation, a, cfg.max_length) for a in p.actions]}
            for p in part.preferences
        ]  # fmt: skip
        return rated + preferred

    options = {"validation": validation, "max_length": cfg.max_length}
    datasets = (encode(train), encode(validation))
    trainer, bridge, metrics = fit(
        StepTrainer, cfg, model, tokenizer, datasets, StepCollator(tokenizer.pad_token_id), hooks, **options
    )
    if not bridge.cancelled and trainer.is_world_process_zero():  # one process saves
        model = trainer.model.merge_and_unload() if cfg.lora_rank else trainer.model
        if len(validation):
            # Scored again, on the model that is saved: with early stopping that is the best checkpoint,
            # not the one the last validation saw.
            rated, pairs = score_steps(model, tokenizer, validation, cfg.max_length)
            metrics["validation"] = step_metrics(rated, validation, pairs)
        summary = {"kind": "prm", "config": cfg.to_dict(), "base_model": str(base_path), "metrics": metrics}
        save_model(model, tokenizer, Path(cfg.output_dir), summary)
    return run_result(cfg, trainer, bridge, metrics, (len(train), len(validation)))
