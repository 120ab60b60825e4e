"""A step-review batch's figures (issue 38), for its results page and the API: how the reviewed steps were
rated, how often an episode has a bad step and where the first one is, why steps are bad, and how labelers
agree (Krippendorff's alpha on the step ratings and on the first bad step's position:
``steps.step_agreement``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from annotation.feedback.agreement import preference_agreement
from annotation.feedback.result_stats import estimate
from annotation.feedback.scales import COMPARISON_SCALE, preference_value
from annotation.feedback.steps import STEP_RATINGS, STEP_REASONS, step_agreement


def step_figures(submitted: Sequence[Any], *, seed: int, resamples: int) -> dict[str, Any]:
    """``submitted``: the batch's kept submissions (``results.Submission``: item, question, labeler,
    response). The share of episodes with a bad step has a bootstrap interval over questions."""
    ratings: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    has_bad, positions = [], []
    by_item: dict[int, dict[int, Any]] = defaultdict(dict)
    for task in submitted:
        steps = task.response.get("steps") if isinstance(task.response.get("steps"), dict) else {}
        for rating in steps.values():
            ratings[rating.get("rating", "")] += 1
            if rating.get("reason"):
                reasons[rating["reason"]] += 1
        first_bad = task.response.get("first_bad")
        has_bad.append((task.question, float(first_bad is not None)))
        if first_bad is not None:
            positions.append(int(first_bad) + 1)
        by_item[task.item][task.labeler] = task.response
    rated = sum(ratings.values())
    agreement = step_agreement(by_item, resamples=resamples, seed=seed)
    return {
        "steps_rated": rated,
        "ratings": [
            {
                "code": code,
                "label": label,
                "count": ratings[code],
                "share": ratings[code] / rated if rated else None,
            }
            for code, label in STEP_RATINGS
        ],
        "with_bad_step": estimate(has_bad, seed=seed, resamples=resamples),
        "mean_first_bad_step": sum(positions) / len(positions) if positions else None,
        "reasons": [
            {"code": code, "label": label, "count": reasons[code]}
            for code, label in STEP_REASONS
            if reasons[code]
        ],
        "agreement": {
            "ratings": asdict(agreement.ratings),
            "first_bad": asdict(agreement.first_bad),
            "first_bad_same": agreement.first_bad_same,
            "first_bad_pairs": agreement.first_bad_pairs,
        },
    }


def step_preference_figures(
    submitted: Sequence[Any], steps: Mapping[int, Mapping[str, Any]], *, seed: int, resamples: int
) -> dict[str, Any]:
    """A step-preference batch's figures: how often labelers prefer the action the episode took (the step
    model's choice: 1 for it, 0.5 equal, 0 for the other; a 95% interval over questions), and why the worse
    action is worse. ``steps``: item id -> ``FeedbackItem.step``."""
    agree, reasons = [], Counter()
    for task in submitted:
        code = task.response.get("preference")
        taken = steps.get(task.item, {}).get("taken")
        if code in dict(COMPARISON_SCALE) and taken in (0, 1):
            for_a = preference_value(code)
            agree.append((task.question, preference_agreement(for_a if taken == 0 else -for_a, 1.0)))
        if task.response.get("reason"):
            reasons[task.response["reason"]] += 1
    return {
        "prefers_step_model": estimate(agree, seed=seed, resamples=resamples),
        "reasons": [
            {"code": code, "label": label, "count": reasons[code]}
            for code, label in STEP_REASONS
            if reasons[code]
        ],
    }
