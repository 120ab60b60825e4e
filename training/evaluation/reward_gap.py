"""Reward hacking, as a proxy evaluation shows it: of the answers each sampling run chose, the mean score of
the run's own (training) reward model beside the validation reward model's. A policy optimised against its
reward model (an RL policy, or best-of-n at a large n) can score well by that model and not by another one
trained on a separate split: the gap between the two is the sign (WebGPT section 5.1; InstructGPT's
over-optimisation). Both scores are rewards less each model's offset (0: an average demonstration), so
they share a scale; the gap is read against the runs' gaps at small n, not as an absolute."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from training.models import ProxyEvaluation, Sample


def reward_gaps(evaluation: ProxyEvaluation, run_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per run: its chosen answers that both models scored, their mean training and validation score and
    the gap (training minus validation). A run without such answers (unscored) is left out."""
    scores = evaluation.scores or {}
    pairs: dict[int, list[tuple[float, float]]] = {}
    chosen = Sample.objects.filter(run_id__in=list(run_ids), chosen=True, score__isnull=False)
    for pk, run_id, training in chosen.values_list("pk", "run_id", "score").order_by("pk"):
        validation = scores.get(str(pk))
        if validation is not None:
            pairs.setdefault(run_id, []).append((training, validation))
    gaps = {}
    for run_id, found in pairs.items():
        training = sum(t for t, _ in found) / len(found)
        validation = sum(v for _, v in found) / len(found)
        gaps[run_id] = {
            "answers": len(found),
            "training": training,
            "validation": validation,
            "gap": training - validation,
        }
    return gaps
