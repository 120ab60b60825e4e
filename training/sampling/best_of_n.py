"""Best-of-n against a reward model, and declining to answer (WebGPT section 3.3; GopherCite).

n complete episodes of one question are each scored by a registered reward model on exactly the input it
was trained on from ``rm-pairs`` exports: the answer prompt ``format_answer_prompt(question, quotes)``
(an export's ``prompt_chosen``) and the answer text (its ``chosen``), encoded by ``training.runs.reward``'s
own ``score``, so the two formats cannot drift. The demonstrations' mean reward (the model's offset) is
subtracted, so 0 means "as good as the average human demonstration". Every sample keeps its score; the
best answered sample is the run's answer, unless its score is below a threshold: then the run declines.
Django-free.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from browser.engine.observation import format_answer_prompt
from browser.engine.page import Quote
from training.runs.config import RMConfig
from training.runs.reward import load_reward_model, reward_offset, score


class Answerable(Protocol):
    """What best-of-n reads of a sample (``episode.EpisodeSample`` is one)."""

    question: str
    quotes: tuple[Quote, ...]
    answer: str | None


class RewardScorer:
    """A reward checkpoint ready to score answers: ``scorer.score_samples(samples) -> [float | None]``.

    ``max_length`` is the one the model was trained with (its ``training.json``), so sequences are cut
    exactly as in training; evaluation is batched, without gradients and in eval mode (no dropout), so
    the same inputs always give the same rewards."""

    def __init__(
        self, model_dir: Path | str, device: str | None = None, batch_size: int = 16, kind: str = "rm"
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model_dir = Path(model_dir)
        self.batch_size = batch_size
        self.max_length = _trained_max_length(self.model_dir, kind)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model, self.tokenizer = load_reward_model(self.model_dir)
        self.model.to(self.device).eval()
        self.offset = reward_offset(self.model_dir)

    def score(self, prompts: Sequence[str], answers: Sequence[str]) -> list[float]:
        """Rewards minus the offset of ``answers[i]`` to answer prompts ``prompts[i]`` (rm-pairs format)."""
        if len(prompts) != len(answers):
            raise ValueError(f"{len(prompts)} prompts for {len(answers)} answers")
        if not answers:
            return []
        raw = score(self.model, self.tokenizer, prompts, answers, self.max_length, self.batch_size)
        return [reward - self.offset for reward in raw]

    def score_samples(self, samples: Sequence[Answerable]) -> list[float | None]:
        """One reward per sample, None for a sample without an answer (declined or quote-less)."""
        answered = [i for i, sample in enumerate(samples) if sample.answer is not None]
        prompts = [format_answer_prompt(samples[i].question, samples[i].quotes) for i in answered]
        rewards = self.score(prompts, [samples[i].answer or "" for i in answered])
        scores: list[float | None] = [None] * len(samples)
        for i, reward in zip(answered, rewards, strict=True):
            scores[i] = reward
        return scores


def _trained_max_length(model_dir: Path, kind: str) -> int:
    """The checkpoint's training ``max_length``. Only a checkpoint of ``kind`` will do ("rm", or "prm": a
    process reward model scores (observation, command) the same way): a plain backbone would load with a
    fresh random head and score noise without a word."""
    summary = model_dir / "training.json"
    trained = json.loads(summary.read_text()) if summary.is_file() else {}
    if trained.get("kind") != kind:
        what = "process reward model" if kind == "prm" else "reward model"
        raise ValueError(f"{model_dir} is not a trained {what} (no training.json of kind {kind!r})")
    config: dict[str, Any] = trained.get("config", {})
    return int(config.get("max_length", RMConfig.max_length))


@dataclass(frozen=True)
class Choice:
    """The outcome of best-of-n for one question. ``scores[i]`` is sample i's score (None: not scored).
    ``best`` is the best answered sample's index (None when no sample answered) and ``best_score`` its
    score; ``chosen`` is ``best`` unless the run ``declined`` (best score below the threshold) or no
    sample answered."""

    scores: tuple[float | None, ...]
    best: int | None
    best_score: float | None
    declined: bool
    threshold: float | None = None

    @property
    def chosen(self) -> int | None:
        return None if self.declined else self.best

    @property
    def answered(self) -> bool:
        return self.chosen is not None


def choose(
    samples: Sequence[Answerable], scores: Sequence[float | None], threshold: float | None = None
) -> Choice:
    """Best-of-n over the n samples of one question: the highest-scoring sample with an answer, ties to
    the lowest index. Samples without an answer are never chosen, whatever their score. With a
    ``threshold``, a best score below it declines (GopherCite): no answer, every score kept."""
    if len(samples) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(samples)} samples")
    best: int | None = None
    for i, (sample, value) in enumerate(zip(samples, scores, strict=True)):
        if sample.answer is None or value is None:
            continue
        current = scores[best] if best is not None else None
        if current is None or value > current:  # strictly greater: the lowest index wins a tie
            best = i
    best_score = scores[best] if best is not None else None
    declined = best_score is not None and threshold is not None and best_score < threshold
    return Choice(tuple(scores), best, best_score, declined, threshold)


def coverage_curve(
    best_scores: Sequence[float | None], thresholds: Sequence[float]
) -> list[tuple[float, float]]:
    """(threshold, share of questions answered) for each threshold, in rising order: a question is
    answered at threshold t when its best score is at least t (None: no sample answered, never counts).
    The run page plots it to show what a decline threshold would cost in coverage."""
    total = len(best_scores)
    present = [s for s in best_scores if s is not None]
    return [(t, sum(s >= t for s in present) / total if total else 0.0) for t in sorted(thresholds)]
