"""A registered reward model as a judge: it scores each answer (``RewardScorer``: the answer prompt of the
question and the answer's quotes, then the answer, minus the model's offset), and the scores become the one
part of a response a reward model can honestly give.

- Comparisons: the overall rating only, from d = score(A) - score(B) in preference logits: |d| at most the
  tie margin is "equal", beyond the much-better margin "much better", between the two "better". The
  confidence is the Bradley-Terry probability of the preferred answer, sigmoid(|d|) (what the reward model
  was trained to predict). No other dimension, flag, trust level or claim: it cannot judge those.
- Rankings: the answers ordered by score (equal scores share a rank); no confidence.
- Ratings: refused when the run is requested (``REFUSES_RATINGS``): a preset's fields ("is it truthful?",
  "0-3 fluency") are absolute judgements, and a reward model's score is only relative to other answers
  of the same question.
Plain Python."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from annotation.feedback.scales import COMPARISON_TEMPLATES, OVERALL
from training.runs.metrics import sigmoid

REFUSES_RATINGS = (
    "a reward model cannot judge a rating batch: it scores answers relative to one another and gives none "
    "of a preset's fields; choose a language model behind an endpoint"
)


def comparison_code(difference: float, tie_margin: float, much_margin: float) -> str:
    """The 5-point code of score(A) - score(B) under the margins."""
    size = abs(difference)
    if size <= tie_margin:
        return "equal"
    side = "a" if difference > 0 else "b"
    return f"{side}_much_better" if size > much_margin else f"{side}_better"


def reward_response(
    template: str, scores: Sequence[float], tie_margin: float, much_margin: float
) -> tuple[dict, float | None]:
    """The response (the human shape, slots in the order of ``scores``) and its confidence."""
    if template in COMPARISON_TEMPLATES:
        difference = scores[0] - scores[1]
        code = comparison_code(difference, tie_margin, much_margin)
        return {"ratings": {OVERALL: code}}, sigmoid(abs(difference))
    if template == "ranking":
        ranks = {
            str(slot): 1 + sum(other > score for other in scores) for slot, score in enumerate(scores, 1)
        }
        return {"ranks": ranks}, None
    raise ValueError(REFUSES_RATINGS)


FLAT_SHARE = 0.9  # a reward-model judge calling at least this share of its comparisons equal is warned about


def flat_reward_warning(
    score_pairs: Sequence[tuple[float, float]], tie_margin: float
) -> dict[str, float] | None:
    """When a reward model's score differences on a run's comparisons (one pair per judgement) fall within
    the tie margin on at least FLAT_SHARE of them, the figures a warning gives: how many, the share, and the
    median difference; else None. The demo's reward model spreads answers by ~0.01 logits: under the default
    margin every verdict is "equally good", which reads as a judge with no opinion rather than a faint one."""
    if not score_pairs:
        return None
    gaps = [abs(first - second) for first, second in score_pairs]
    ties = sum(gap <= tie_margin for gap in gaps)
    if ties < FLAT_SHARE * len(gaps):
        return None
    return {"ties": ties, "judgements": len(gaps), "median_gap": median(gaps), "tie_margin": tie_margin}
