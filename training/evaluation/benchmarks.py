"""TriviaQA scoring for benchmark runs (issue 39, groundwork; Django-free): a policy's answers against each
question's aliases, as SQuAD and TriviaQA's own evaluation score them.

Normalisation (SQuAD v1.1's ``normalize_answer``, which TriviaQA's evaluation uses): lower case, punctuation
removed, the articles "a", "an" and "the" removed, white space collapsed. Per question, the best over its
aliases of:

- **exact match**: the normalised answer equals a normalised alias (1 or 0);
- **F1**: the token F1 of the answer against an alias (tokens of the normalised texts, counted with their
  multiplicity);
- **contains**: a normalised alias stands in the normalised answer as whole tokens. WebGPT's policies answer
  in paragraphs, where exact match is nearly always 0: this says whether the answer names the right thing.

A question the policy declined (no answer) is counted apart, never scored 0 against it: each measure is over
the answered questions, with its 95% bootstrap interval over questions; ``coverage`` is the share answered.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.result_stats import estimate

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation: lower case, no punctuation, no articles, single spaces."""
    lowered = text.lower()
    no_punctuation = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", no_punctuation).split())


def exact_match(answer: str, aliases: Sequence[str]) -> float:
    normalized = normalize_answer(answer)
    return float(any(normalized == normalize_answer(alias) for alias in aliases))


def _token_f1(answer_tokens: list[str], alias_tokens: list[str]) -> float:
    common = Counter(answer_tokens) & Counter(alias_tokens)
    same = sum(common.values())
    if not same:
        return 0.0
    precision, recall = same / len(answer_tokens), same / len(alias_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(answer: str, aliases: Sequence[str]) -> float:
    tokens = normalize_answer(answer).split()
    return max((_token_f1(tokens, normalize_answer(alias).split()) for alias in aliases), default=0.0)


def contains_alias(answer: str, aliases: Sequence[str]) -> float:
    padded = f" {normalize_answer(answer)} "
    return float(any(f" {alias} " in padded for alias in map(normalize_answer, aliases) if alias))


@dataclass(frozen=True)
class TriviaQAAnswer:
    """One question's answer (None: declined) and its aliases."""

    question: Hashable
    answer: str | None
    aliases: Sequence[str]


MEASURES = {"exact_match": exact_match, "f1": f1_score, "contains": contains_alias}


def triviaqa_scores(
    answers: Sequence[TriviaQAAnswer], *, seed: int = 0, resamples: int = 1000
) -> dict[str, Any]:
    """Each measure over the answered questions (``estimate``: value, 95% interval over questions, counts),
    how many questions were asked, answered and declined, and each question's measures."""
    measured = [
        {name: measure(a.answer, a.aliases) for name, measure in MEASURES.items()}
        if a.answer is not None
        else None
        for a in answers
    ]
    answered = [
        (a.question, scores) for a, scores in zip(answers, measured, strict=True) if scores is not None
    ]
    figures = {
        name: estimate(
            ((question, scores[name]) for question, scores in answered), seed=seed, resamples=resamples
        )
        for name in MEASURES
    }
    return {
        **figures,
        "questions": len(answers),
        "answered": len(answered),
        "declined": len(answers) - len(answered),
        "coverage": len(answered) / len(answers) if answers else None,
        # Each question in order: its measures, none for a declined one.
        "per_question": [
            {"question": a.question, **(scores or {})} for a, scores in zip(answers, measured, strict=True)
        ],
    }
