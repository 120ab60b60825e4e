"""What an RL run is given and what it reports: plain data, no torch (the job builds it from the database)."""

from __future__ import annotations

from dataclasses import dataclass, field

from browser.engine.page import Quote


@dataclass(frozen=True)
class RLQuestion:
    """A question of the run. ``references``: quote sets of finished episodes or answers to it, each the
    prompt of answer-only episodes (the question and those quotes, as in rm-pairs). ``reference_answers``:
    what the browser's reset takes (short answers of TriviaQA-like sets), for browsing episodes."""

    id: int
    text: str
    references: tuple[tuple[Quote, ...], ...] = ()
    reference_answers: tuple[str, ...] = ()


@dataclass
class EpisodeReport:
    """One episode of a step, as the run page shows it: ``kind`` answer or browse, the reward (minus the
    reward model's offset; ``no_answer_reward`` without an answer), the answer's tokens, and for a browsing
    episode its commands and how many were invalid."""

    question_id: int
    question: str
    kind: str
    answer: str | None
    reward: float
    answer_tokens: int
    commands: list[str] = field(default_factory=list)
    invalid_actions: int = 0
