"""What an RL run is given and what it reports: plain data, no torch (the job builds it from the database)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class EpisodeTerms:
    """What one episode put into its step's objective (``training.rl.objective``), from the step's first
    pass (the policy that sampled it: ratio 1), so that the step's logged figures can be recomputed from
    its episodes alone (docs/training.md, "Auditing a run"):

    - ``group``: its group among the whole step's (the episodes its advantage is measured against);
    - ``baseline``: the group's mean reward; ``scale``: what the advantage is divided by (the group's
      standard deviation, or 1: unscaled, or a group whose rewards are all equal);
      ``advantage`` = (reward - baseline) / scale;
    - ``tokens``: its policy tokens in the loss (after fitting into max_length); ``kl``: the sum over them
      of the per-token k3 KL to the starting policy (nats); ``kl_penalty``: kl_coef * kl, its KL term in
      the loss; ``entropy``: the sum over them of the sampling distribution's entropy.
    """

    group: int
    baseline: float
    scale: float
    advantage: float
    tokens: int
    kl: float
    kl_penalty: float
    entropy: float


@dataclass
class EpisodeReport:
    """One episode of a step, as the run page shows it: ``kind`` answer or browse, the reward (minus the
    reward model's offset; ``no_answer_reward`` without an answer), the answer's tokens, and for a browsing
    episode its commands and how many were invalid. Kept besides (RLEpisode rows, not the page): the
    quotes its answer was prompted with (answer-only: the reference it was given; browsing: those it
    gathered), and its terms of the objective (set by the trainer after the step's update)."""

    question_id: int
    question: str
    kind: str
    answer: str | None
    reward: float
    answer_tokens: int
    commands: list[str] = field(default_factory=list)
    invalid_actions: int = 0
    quotes: tuple[Quote, ...] = ()
    terms: EpisodeTerms | None = None

    def shown(self) -> dict[str, Any]:
        """What the run page shows of it (the row's ``samples``): all but the quotes and the terms."""
        fields = asdict(self)
        del fields["quotes"], fields["terms"]
        return fields
