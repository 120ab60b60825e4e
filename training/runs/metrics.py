"""Preference metrics from rewards: accuracy (ties excluded) with a 95% Wilson interval, log-loss with the
soft targets, and calibration (predicted vs observed preference in bins). Plain math, no torch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from annotation.feedback.agreement import wilson_interval


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def preference_metrics(
    differences: Sequence[float], targets: Sequence[float], bins: int = 10
) -> dict[str, Any]:
    """``differences[k]`` = r(i) - r(j) for pair k whose target P(i beats j) is ``targets[k]``."""
    if len(differences) != len(targets):
        raise ValueError("one target per difference")
    decided = [(d, t) for d, t in zip(differences, targets, strict=True) if t != 0.5]
    correct = sum(1 for d, t in decided if (d > 0) == (t > 0.5))
    low, high = wilson_interval(correct, len(decided))
    eps = 1e-7
    losses = [
        -(t * math.log(max(sigmoid(d), eps)) + (1 - t) * math.log(max(1 - sigmoid(d), eps)))
        for d, t in zip(differences, targets, strict=True)
    ]
    # Each pair seen both ways round, so that the bins cover [0, 1] and not only the preferred side.
    points = [(sigmoid(d), t) for d, t in zip(differences, targets, strict=True)]
    points += [(1 - p, 1 - t) for p, t in points]
    calibration = []
    for b in range(bins):
        members = [(p, t) for p, t in points if min(int(p * bins), bins - 1) == b]
        if members:
            calibration.append(
                {
                    "bin": [b / bins, (b + 1) / bins],
                    "count": len(members),
                    "predicted": sum(p for p, _ in members) / len(members),
                    "observed": sum(t for _, t in members) / len(members),
                }
            )
    return {
        "accuracy": correct / len(decided) if decided else float("nan"),
        "accuracy_ci95": [low, high],
        "log_loss": sum(losses) / len(losses) if losses else float("nan"),
        "pairs": len(differences),
        "decided_pairs": len(decided),
        "calibration": calibration,
    }
