"""Gold checks in production batches: each labeler's rolling accuracy on gold items per kind of work, and the
automatic pause when it falls under the batch's threshold (nothing already submitted is touched)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from annotation.feedback.agreement import wilson_interval
from annotation.models import Assignment, AssignmentStatus, FlagDecision, work_kind
from annotation.workforce.judgements import FLAGS, canonical, compare, main_measure
from annotation.workforce.states import State, set_state, state_of
from core.permissions import AnyUser


def gold_score(template: str, mine: dict, reference: dict) -> float | None:
    """One gold judgement's score: the kind's main measure (1, 0.5 or 0; rankings the share of pairs); a
    flag where the reference has a preference (or the reverse) is a disagreement (0). None when the
    reference says nothing this judgement can be scored on."""
    scores = compare(template, mine, reference)
    main = main_measure(template)
    if main in scores:
        return scores[main]
    if FLAGS in scores:
        return scores[FLAGS]
    return 0.0 if main in reference or reference.get(FLAGS) else None


@dataclass(frozen=True)
class GoldCheck:
    assignment_id: int
    item_id: int
    batch_id: int
    submitted_at: datetime  # the first submission, the one scored
    score: float
    revised: bool = False  # changed after the first submission (the revision is kept, never scored)


def gold_checks(labeler: AnyUser | int, kind: str | None = None) -> list[GoldCheck]:
    """The labeler's scored gold judgements in production batches (screening tests aside), oldest first,
    each scored on its first submission: a labeler who saw the reference (My quality) cannot revise their
    way to a better score. Judgements excluded on flag review do not count."""
    tasks = (
        Assignment.objects.filter(
            labeler=labeler,
            status=AssignmentStatus.SUBMITTED,
            item__is_gold=True,
            item__batch__is_screening=False,
        )
        .exclude(flag_decision=FlagDecision.EXCLUDE)
        .select_related("item__batch")
        .order_by("first_submitted_at", "id")
    )
    checks = []
    for task in tasks:
        batch = task.item.batch
        if kind is not None and work_kind(batch.template, batch.preset) != kind:
            continue
        mine = canonical(batch.template, task.scored_response, task.order, batch.preset)
        score = gold_score(batch.template, mine, task.item.gold_expected or {})
        if score is not None:
            checks.append(
                GoldCheck(task.pk, task.item_id, batch.pk, task.first_submitted_at, score, task.revised)
            )
    return checks


@dataclass(frozen=True)
class Accuracy:
    accuracy: float | None
    count: int
    low: float
    high: float


def share(scores: Iterable[float]) -> Accuracy:
    """The mean of scores in [0, 1] with its count and 95% Wilson interval (a half counts half)."""
    scores = list(scores)
    if not scores:
        return Accuracy(None, 0, 0.0, 1.0)
    total = sum(scores)
    return Accuracy(total / len(scores), len(scores), *wilson_interval(total, len(scores)))


def accuracy_of(checks: list[GoldCheck]) -> Accuracy:
    """Mean score of gold judgements with its 95% Wilson interval."""
    return share(check.score for check in checks)


def rolling_window(min_items: int) -> int:
    return max(settings.GOLD_ROLLING_WINDOW, min_items)


def check_after_gold(task: Assignment) -> None:
    """After a qualified labeler's gold judgement: pause them for this kind of work when their accuracy over
    the last ``rolling_window`` gold judgements is under the batch's threshold, with at least
    ``gold_min_items`` of them."""
    batch = task.item.batch
    kind = work_kind(batch.template, batch.preset)
    if state_of(task.labeler, kind) != State.QUALIFIED:
        return
    recent = gold_checks(task.labeler_id, kind)[-rolling_window(batch.gold_min_items) :]
    rolling = accuracy_of(recent)
    if (
        rolling.count < batch.gold_min_items
        or rolling.accuracy is None
        or rolling.accuracy >= batch.gold_threshold
    ):
        return
    reason = (
        f"Paused automatically: gold accuracy {rolling.accuracy:.0%} over the last {rolling.count} "
        f"gold items (95% interval {rolling.low:.0%}-{rolling.high:.0%}) is under {batch.name}'s threshold"
        f" of {batch.gold_threshold:.0%}."
    )
    figures = {
        "accuracy": rolling.accuracy,
        "count": rolling.count,
        "low": rolling.low,
        "high": rolling.high,
        "threshold": batch.gold_threshold,
        "batch": batch.pk,
    }
    set_state(task.labeler, kind, State.PAUSED, by=None, reason=reason, figures=figures)
