"""Handing out feedback work with leases, and taking it back: drafts, submissions, skips, revisions.

Concurrency: items are chosen with ``SELECT ... FOR UPDATE SKIP LOCKED`` and their slot counters change
only under the item's row lock, so many labelers asking at once never share a lease and an item never has
more than ``overlap`` labelers. Locks are always taken assignment first, then item, to avoid deadlocks.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotation.feedback.validation import AnswerShape, Validation, draw_required_all, validate_response
from annotation.models import Answer, Assignment, AssignmentRevision, AssignmentStatus, FeedbackItem
from webgpt_site.models import log_action
from webgpt_site.permissions import AnyUser

IDLE_LIMIT = timedelta(seconds=60)
RECLAIM_BATCH = 200  # expired leases returned per call, so one request never does unbounded work


class TaskClosed(ValueError):
    """The assignment cannot take this change (expired and taken by someone else, past revision...)."""


@dataclass(frozen=True)
class SubmitResult:
    validation: Validation | None  # None when the same submission was already applied
    assignment: Assignment


def next_assignment(labeler: AnyUser, *, now: datetime | None = None) -> Assignment | None:
    """The labeler's live lease, or a new one on an item they never had; None when nothing is left."""
    now = now or timezone.now()
    current = Assignment.objects.filter(
        labeler=labeler, status=AssignmentStatus.LEASED, leased_until__gt=now
    ).first()
    if current is not None:
        return current
    reclaim_expired(now)
    with transaction.atomic():
        item = _pick_item(labeler)
        if item is None:
            return None
        batch = item.batch
        order = list(item.answers.order_by("id").values_list("id", flat=True))
        random.SystemRandom().shuffle(order)  # blinding: A/B and ranking order differ per assignment
        assignment = Assignment.objects.create(
            item=item,
            labeler=labeler,
            order=order,
            leased_until=now + batch.lease,
            last_seen_at=now,
        )
        assignment.required_all = draw_required_all(
            f"{assignment.pk}:{uuid.uuid4()}", batch.required_probability
        )
        assignment.save(update_fields=["required_all"])
        item.slots_taken += 1
        item.is_open = item.slots_taken < batch.overlap
        item.save(update_fields=["slots_taken", "is_open"])
    return assignment


def _pick_item(labeler: AnyUser) -> FeedbackItem | None:
    had_it = Assignment.objects.filter(item=OuterRef("pk"), labeler=labeler)
    items = FeedbackItem.objects.filter(is_open=True, batch__is_active=True).filter(~Exists(had_it))
    # The labeler's own answers as a list, not a join: with the join PostgreSQL misjudged how many items
    # it removes and sorted the whole pool (250 ms at 100k items) instead of walking the index.
    own = list(Answer.objects.filter(episode__user=labeler).values_list("id", flat=True))
    if own:
        links = FeedbackItem.answers.through.objects.filter(feedbackitem_id=OuterRef("pk"), answer_id__in=own)
        items = items.filter(~Exists(links))
    return (
        items.select_related("batch")
        .order_by("is_open", "batch_id", "id")
        .select_for_update(skip_locked=True, of=("self",))
        .first()
    )


def reclaim_expired(now: datetime | None = None) -> int:
    """Return the slots of leases that ran out to the pool (the labeler can never get that item again)."""
    now = now or timezone.now()
    with transaction.atomic():
        expired = list(
            Assignment.objects.filter(status=AssignmentStatus.LEASED, leased_until__lt=now)
            .select_for_update(skip_locked=True)
            .values_list("pk", "item_id")[:RECLAIM_BATCH]
        )
        if not expired:
            return 0
        Assignment.objects.filter(pk__in=[pk for pk, _ in expired]).update(status=AssignmentStatus.EXPIRED)
        for _, item_id in sorted(expired, key=lambda pair: pair[1]):
            _release_slot(item_id)
    return len(expired)


def _release_slot(item_id: int) -> None:
    item = FeedbackItem.objects.select_for_update().get(pk=item_id)
    item.slots_taken = max(0, item.slots_taken - 1)
    item.is_open = True
    item.save(update_fields=["slots_taken", "is_open"])


def own_assignment(labeler: AnyUser, pk: int) -> Assignment | None:
    """The labeler's own assignment with its batch and question, or None (callers answer 404: anyone
    else's task looks exactly like a missing one)."""
    return (
        Assignment.objects.filter(pk=pk, labeler=labeler)
        .select_related("item__batch", "item__question")
        .first()
    )


def _locked(assignment_id: int, labeler: AnyUser) -> Assignment:
    # of=("self",): lock the assignment only, not the batch row joined in (that would serialise a batch).
    return (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("item__batch")
        .get(pk=assignment_id, labeler=labeler)
    )


def _touch(assignment: Assignment, now: datetime) -> None:
    if assignment.last_seen_at is not None and timedelta(0) <= now - assignment.last_seen_at <= IDLE_LIMIT:
        assignment.active_seconds += (now - assignment.last_seen_at).total_seconds()
    assignment.last_seen_at = now


def keep_alive(assignment_id: int, labeler: AnyUser) -> Assignment:
    """Renew the lease while the page is open. A lease that expired is taken back if its slot is still
    free; if someone else took it, TaskClosed."""
    now = timezone.now()
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if assignment.status == AssignmentStatus.LEASED and assignment.leased_until < now:
            # Ran out but not reclaimed yet: nobody else can have the slot, so simply renew.
            pass
        elif assignment.status == AssignmentStatus.EXPIRED:
            item = FeedbackItem.objects.select_for_update().get(pk=assignment.item_id)
            if item.slots_taken >= item.batch.overlap:
                raise TaskClosed("Your time on this task ran out and it went to someone else.")
            item.slots_taken += 1
            item.is_open = item.slots_taken < item.batch.overlap
            item.save(update_fields=["slots_taken", "is_open"])
            assignment.status = AssignmentStatus.LEASED
        elif assignment.status != AssignmentStatus.LEASED:
            return assignment
        assignment.leased_until = now + assignment.item.batch.lease
        _touch(assignment, now)
        assignment.save(update_fields=["status", "leased_until", "active_seconds", "last_seen_at"])
    return assignment


def save_draft(assignment_id: int, labeler: AnyUser, draft: dict) -> Assignment:
    """Keep the work in progress on the server (and renew the lease)."""
    assignment = keep_alive(assignment_id, labeler)
    if assignment.status not in (AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED):
        raise TaskClosed("This task is closed.")
    Assignment.objects.filter(pk=assignment.pk).update(draft=draft)
    assignment.draft = draft
    return assignment


def answer_shapes(assignment: Assignment) -> list[AnswerShape]:
    """The answers in the order shown, with what validation needs to know about them."""
    answers = Answer.objects.in_bulk(assignment.order)
    slot_names = _slot_names(len(assignment.order), assignment.item.batch.template)
    return [
        AnswerShape(slot=slot, text_length=len(answers[pk].text), quote_count=len(answers[pk].quotes))
        for slot, pk in zip(slot_names, assignment.order, strict=True)
    ]


def _slot_names(count: int, template: str) -> list[str]:
    return ["A", "B"][:count] if template.endswith("comparison") else [str(i) for i in range(1, count + 1)]


def submit(
    assignment_id: int,
    labeler: AnyUser,
    response: dict,
    key: uuid.UUID,
) -> SubmitResult:
    """Validate and store the response. The same key again is a no-op; a submitted task may be revised
    within the batch's revision window (the previous response is kept as a revision)."""
    now = timezone.now()
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if assignment.submit_key == key:
            return SubmitResult(None, assignment)
        batch = assignment.item.batch
        if assignment.status == AssignmentStatus.SUBMITTED:
            if now - assignment.submitted_at > timedelta(seconds=batch.revision_seconds):
                raise TaskClosed("The time to revise this task has passed.")
        elif assignment.status != AssignmentStatus.LEASED:
            raise TaskClosed("This task is closed.")
        result = validate_response(
            batch.template,
            response,
            answers=answer_shapes(assignment),
            required_all=assignment.required_all,
            always_required=batch.always_required,
            preset=batch.preset or None,
        )
        assignment.draft = response
        _touch(assignment, now)
        if result.complete:
            if assignment.status == AssignmentStatus.SUBMITTED:
                AssignmentRevision.objects.create(
                    assignment=assignment,
                    response=assignment.response,
                    flags=assignment.flags,
                    submitted_at=assignment.submitted_at,
                )
            assignment.response, assignment.flags = result.cleaned, list(result.flags)
            assignment.status, assignment.submitted_at, assignment.submit_key = (
                AssignmentStatus.SUBMITTED,
                now,
                key,
            )
            log_action(labeler, "assignment.submit", assignment, flags=list(result.flags))
        assignment.save()
    return SubmitResult(result, assignment)


def skip(assignment_id: int, labeler: AnyUser, reason: str) -> None:
    """Give the task back with a reason; its slot returns to the pool for another labeler."""
    if not reason.strip():
        raise TaskClosed("Say why you skip this task.")
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if assignment.status != AssignmentStatus.LEASED:
            raise TaskClosed("Only a task in progress can be skipped.")
        assignment.status, assignment.skip_reason = AssignmentStatus.SKIPPED, reason.strip()
        assignment.save(update_fields=["status", "skip_reason"])
        _release_slot(assignment.item_id)
        log_action(labeler, "assignment.skip", assignment, reason=reason.strip())
