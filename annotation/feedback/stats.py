"""Batch progress and per-labeler quality for researchers: throughput, time, agreement, gold accuracy."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from annotation.feedback.agreement import comparison_agreement, gold_accuracy, ranking_agreement
from annotation.feedback.scales import COMPARISON_TEMPLATES, preference_value
from annotation.models import Assignment, AssignmentStatus, FeedbackBatch, FlagDecision, RoutePath


def batch_progress(batch: FeedbackBatch) -> dict[str, int]:
    counts = batch.items.aggregate(
        items=Count("id", distinct=True),
        submitted=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED)),
        leased=Count("assignments", filter=Q(assignments__status=AssignmentStatus.LEASED)),
        skipped=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SKIPPED)),
        late=Count("assignments", filter=Q(assignments__status=AssignmentStatus.LATE)),
        flagged=Count(
            "assignments",
            filter=Q(assignments__status=AssignmentStatus.SUBMITTED) & ~Q(assignments__flags=[]),
        ),
        # Routing: items a judge's verdict decided need no labeler (a one-to-one join: no row doubles).
        judge_decided=Count("id", distinct=True, filter=Q(routing__path=RoutePath.JUDGE)),
    )
    # Adaptive overlap: the judgements asked for on disagreement are needed too (a separate query: summed
    # over the join above, each item's extra would count once per assignment).
    extra = batch.items.aggregate(extra=Sum("extra_overlap"))["extra"] or 0
    counts["needed"] = (counts["items"] - counts["judge_decided"]) * batch.overlap + extra
    return counts


def overlap_summary(batch: FeedbackBatch) -> dict[str, Any]:
    """Adaptive overlap's outcome: how many items asked for extra judgements (and how many in all), and the
    distribution of final overlaps, an item's final overlap being its number of SUBMITTED judgements (late,
    skipped and reference ones are not judgements of the batch; an item nobody judged yet counts 0)."""
    rows = list(
        batch.items.annotate(
            judged=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED))
        ).values_list("judged", "extra_overlap")
    )
    distribution = Counter(judged for judged, _ in rows)
    return {
        "max_overlap": batch.max_overlap,
        "items": len(rows),
        "extra_items": sum(1 for _, extra in rows if extra),
        "extra_judgements": sum(extra for _, extra in rows),
        "distribution": [{"overlap": k, "items": distribution[k]} for k in sorted(distribution)],
    }


def late_submissions(batch: FeedbackBatch) -> QuerySet[Assignment]:
    """Responses that came after their lease ran out and its slot went to someone else: kept for review,
    left out of exports (which take submitted assignments only)."""
    return (
        Assignment.objects.filter(item__batch=batch, status=AssignmentStatus.LATE)
        .select_related("labeler", "item__question")
        .order_by("submitted_at", "id")
    )


def _preference_for_first_answer(assignment: Assignment, response: dict | None = None) -> float | None:
    """The overall preference for the answer with the lower id, whatever order the labeler saw, in
    ``response`` (by default the task's latest)."""
    response = assignment.response if response is None else response
    code = ((response or {}).get("ratings") or {}).get("overall")
    if code is None:
        return None
    value = preference_value(code)
    return value if assignment.order[0] == min(assignment.order) else -value


def labeler_stats(batch: FeedbackBatch) -> list[dict[str, Any]]:
    """One row per labeler: submitted, skipped, flagged, median active time, agreement with the others
    (comparisons: overall preference; rankings: pairwise order) and accuracy on gold items (on their first
    submission); judgements excluded on flag review count as submitted and flagged, never towards agreement
    or gold accuracy."""
    assignments = list(
        Assignment.objects.filter(item__batch=batch).select_related("labeler", "item").order_by("id")
    )
    rows: dict[int, dict[str, Any]] = {}
    preferences: dict[str, dict[str, float]] = defaultdict(dict)
    rankings: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    gold_labels: dict[str, dict[str, float]] = defaultdict(dict)
    gold_truth: dict[str, float] = {}
    times: dict[int, list[float]] = defaultdict(list)
    for task in assignments:
        row = rows.setdefault(
            task.labeler_id,
            {"labeler": task.labeler.get_username(), "submitted": 0, "skipped": 0, "flagged": 0},
        )
        if task.status == AssignmentStatus.SKIPPED:
            row["skipped"] += 1
        if task.status != AssignmentStatus.SUBMITTED:
            continue
        row["submitted"] += 1
        row["flagged"] += bool(task.flags)
        times[task.labeler_id].append(task.active_seconds)
        if task.flag_decision == FlagDecision.EXCLUDE:
            continue  # still the labeler's work (counted above), but not a judgement to agree with
        labeler, item = str(task.labeler_id), str(task.item_id)
        if batch.template in COMPARISON_TEMPLATES:
            value = _preference_for_first_answer(task)
            if value is not None:
                preferences[item][labeler] = value
            # Gold accuracy reads the first submission, as the gold checks do: a revision is not scored.
            first = _preference_for_first_answer(task, task.scored_response)
            if first is not None and task.item.is_gold and "preference" in task.item.gold_expected:
                gold_labels[labeler][item] = first
                gold_truth[item] = float(task.item.gold_expected["preference"])
        elif batch.template == "ranking":
            ranks = (task.response or {}).get("ranks") or {}
            rankings[item][labeler] = {
                str(answer_id): float(ranks[str(position)])
                for position, answer_id in enumerate(task.order, start=1)
                if str(position) in ranks
            }
    agreement = comparison_agreement(preferences) if preferences else ranking_agreement(rankings)
    for labeler_id, row in rows.items():
        row["median_active_seconds"] = statistics.median(times[labeler_id]) if times[labeler_id] else None
        row["agreement"] = agreement.get(str(labeler_id))
        row["gold_accuracy"] = gold_accuracy(gold_labels[str(labeler_id)], gold_truth) if gold_truth else None
    return sorted(rows.values(), key=lambda row: row["labeler"])
