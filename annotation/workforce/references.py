"""Researchers' reference judgements: entered on the normal task page, stored on the item as its gold
expectation (``FeedbackItem.gold_expected``, the shape ``judgements.canonical`` gives), which screening
scores and gold checks read. Imported references (gold pairs) land in the same field."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, AssignmentStatus, FeedbackItem
from annotation.workforce.judgements import canonical
from core.models import log_action
from core.permissions import AnyUser


class ReferenceError(ValueError):
    """The researcher judged this item as a labeler: their judgement cannot also be the reference."""


def start_reference(item: FeedbackItem, researcher: AnyUser) -> Assignment:
    """The researcher's reference task on ``item`` (made on first use, in the answers' id order). It holds
    no slot: labelers' overlap is untouched, and its lease never returns anything to the pool."""
    with transaction.atomic():
        existing = Assignment.objects.filter(item=item, labeler=researcher).first()
        if existing is not None:
            if not existing.is_reference:
                raise ReferenceError(
                    "You judged this item as a labeler; another researcher enters its reference."
                )
            return existing
        task = Assignment.objects.create(
            item=item,
            labeler=researcher,
            order=list(item.answers.order_by("id").values_list("id", flat=True)),
            leased_until=timezone.now() + item.batch.lease,
            last_seen_at=timezone.now(),
            is_reference=True,
        )
        log_action(researcher, "reference.start", task, item=item.pk)
    return task


def record_reference(task: Assignment) -> None:
    """Store a submitted reference on its item (the caller holds the assignment's lock)."""
    batch = task.item.batch
    item = FeedbackItem.objects.select_for_update().get(pk=task.item_id)
    item.gold_expected = canonical(batch.template, task.response, task.order, batch.preset)
    item.is_gold = True
    item.save(update_fields=["gold_expected", "is_gold"])


def referenced_items(batch_id: int) -> dict[int, dict]:
    """Item id -> reference of the batch's items that have one."""
    rows = FeedbackItem.objects.filter(batch_id=batch_id, is_gold=True).values_list("pk", "gold_expected")
    return {pk: expected for pk, expected in rows if expected}


def reference_tasks(batch_id: int) -> dict[int, Assignment]:
    """Item id -> the reference task entered on it (the latest when several researchers did)."""
    tasks = Assignment.objects.filter(item__batch_id=batch_id, is_reference=True).order_by(
        "submitted_at", "id"
    )
    return {task.item_id: task for task in tasks if task.status == AssignmentStatus.REFERENCE}
