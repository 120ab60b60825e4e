"""A judgement as the reference compares it: the same whatever order the answers were shown in (plain Python).

``canonical`` turns a labeler's cleaned response and the display order into
- comparisons: ``{"preference": p, "flags": [...]}``, p the overall preference for the answer with the lower
  id in [-1, 1] (``FeedbackItem.gold_expected``'s own shape), flags the question flags ticked;
- rankings: ``{"ranks": {answer id: rank}}``;
- ratings: ``{"fields": {field code: choice}}`` (the choice fields of the preset);
- step reviews: ``{"first_bad": step or "none", "steps": {step: rating}}`` (``feedback/steps.py``);
- step preferences: ``{"preference": p}``, p the preference for candidate A (the item's candidates keep
  one order for every labeler).
``compare`` scores one judgement against a reference, measure by measure (InstructGPT B.1's measures).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from annotation.feedback.agreement import preference_agreement, ranking_pair_agreement
from annotation.feedback.scales import COMPARISON_TEMPLATES, OVERALL, preference_value, rating_fields
from annotation.feedback.steps import first_bad_value

PREFERENCE = "preference"
FLAGS = "flags"
RANKING = "ranking"
FIELDS = "fields"
FIRST_BAD = "first_bad"
STEPS = "steps"
MEASURE_LABELS = {
    PREFERENCE: "Agreement with the reference preference",
    FLAGS: "Agreement on the question flags",
    RANKING: "Agreement with the reference ranking (pairs of answers)",
    FIELDS: "Agreement with the reference ratings",
    FIRST_BAD: "Agreement with the reference first bad step",
    STEPS: "Agreement with the reference step ratings",
}


def canonical(
    template: str, response: Mapping[str, Any] | None, order: Sequence[int], preset: str = ""
) -> dict:
    response = response or {}
    if template in COMPARISON_TEMPLATES:
        judgement: dict[str, Any] = {
            FLAGS: sorted(code for code, on in (response.get("flags") or {}).items() if on)
        }
        code = (response.get("ratings") or {}).get(OVERALL)
        if code is not None and len(order) == 2:
            value = preference_value(code)
            judgement[PREFERENCE] = value if order[0] == min(order) else -value
        return judgement
    if template == "ranking":
        ranks = response.get("ranks") or {}
        return {
            "ranks": {
                str(answer): ranks[str(position)]
                for position, answer in enumerate(order, start=1)
                if str(position) in ranks
            }
        }
    if template == "step_preference":
        code = response.get(PREFERENCE)
        return {PREFERENCE: preference_value(code)} if code is not None else {}
    if template == "step_review":
        steps = response.get(STEPS) or {}
        return {
            FIRST_BAD: first_bad_value(response),
            STEPS: {
                str(key): rating.get("rating") for key, rating in steps.items() if isinstance(rating, dict)
            },
        }
    choices = [field.code for field in rating_fields(preset) if field.choices]
    return {FIELDS: {code: response[code] for code in choices if code in response}}


def compare(template: str, mine: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, float]:
    """Per measure, how far ``mine`` agrees with ``reference`` (1 agree, 0.5 half: one tie, 0 disagree; for
    rankings the share of answer pairs ordered alike; for ratings the share of fields chosen alike). A
    measure the reference or the judgement lacks is left out. Flags are compared only when the template has
    them: a flagged question ends a WebGPT comparison, so a reference that flags it is matched by flagging."""
    scores: dict[str, float] = {}
    if template == "step_preference":
        if PREFERENCE in mine and PREFERENCE in reference:
            scores[PREFERENCE] = preference_agreement(float(mine[PREFERENCE]), float(reference[PREFERENCE]))
    elif template in COMPARISON_TEMPLATES:
        if template == "webgpt_comparison" and FLAGS in reference:
            scores[FLAGS] = float(sorted(mine.get(FLAGS) or []) == sorted(reference[FLAGS]))
        if PREFERENCE in mine and PREFERENCE in reference and not reference.get(FLAGS):
            scores[PREFERENCE] = preference_agreement(float(mine[PREFERENCE]), float(reference[PREFERENCE]))
    elif template == "ranking":
        ranks = {k: float(v) for k, v in (mine.get("ranks") or {}).items()}
        reference_ranks = {k: float(v) for k, v in (reference.get("ranks") or {}).items()}
        pairs = ranking_pair_agreement(ranks, reference_ranks)
        if pairs is not None:
            scores[RANKING] = pairs
    elif template == "step_review":
        # PRM800K's measure first: where the first mistake is, the one a verifier has to find.
        if FIRST_BAD in mine and FIRST_BAD in reference:
            scores[FIRST_BAD] = float(mine[FIRST_BAD] == reference[FIRST_BAD])
        theirs, own = reference.get(STEPS) or {}, mine.get(STEPS) or {}
        shared = [step for step in theirs if step in own]
        if shared:
            scores[STEPS] = sum(own[step] == theirs[step] for step in shared) / len(shared)
    else:
        theirs = reference.get(FIELDS) or {}
        shared = [code for code in theirs if code in (mine.get(FIELDS) or {})]
        if shared:
            scores[FIELDS] = sum(mine[FIELDS][code] == theirs[code] for code in shared) / len(shared)
    return scores


def main_measure(template: str) -> str:
    """The measure a kind's gold accuracy and screening agreement are read from."""
    if template in COMPARISON_TEMPLATES:
        return PREFERENCE
    return {"ranking": RANKING, "step_review": FIRST_BAD, "step_preference": PREFERENCE}.get(template, FIELDS)
