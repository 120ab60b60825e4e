"""Handing out feedback work with leases, and taking it back: drafts, submissions, skips, revisions.

Concurrency: items are chosen with ``SELECT ... FOR UPDATE SKIP LOCKED`` and their slot counters change
only under the item's row lock, so many labelers asking at once never share a lease and an item never has
more than ``overlap`` labelers. Locks are always taken assignment first, then item, to avoid deadlocks.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from annotation.feedback.flag_review import clear_on_revision
from annotation.feedback.slots import has_room, release_slot
from annotation.feedback.validation import AnswerShape, Validation, draw_required_all, validate_response
from annotation.models import (
    Answer,
    Assignment,
    AssignmentRevision,
    AssignmentStatus,
    Episode,
    EpisodeAction,
    FeedbackItem,
)
from annotation.workforce.after_submit import after_submit
from annotation.workforce.gate import open_batch_priorities, open_batches, refusal
from core.models import log_action
from core.permissions import AnyUser

IDLE_LIMIT = timedelta(seconds=60)
RECLAIM_BATCH = 200  # expired leases returned per call, so one request never does unbounded work


class TaskClosed(ValueError):
    """The assignment cannot take this change (expired and taken by someone else, past revision...)."""


SLOT_GONE = (
    "Your time on this task ran out and it went to someone else. You can still submit: your response is "
    "then kept as a late submission, which researchers see but exports leave out."
)
STALE_TASK = (
    "This task was submitted or skipped in another tab or window since this page was loaded: "
    "here is its current state."
)


class TaskChanged(TaskClosed):
    """The page was drawn from an older version of the task (another tab submitted or skipped since)."""


@dataclass(frozen=True)
class SubmitResult:
    validation: Validation | None  # None when nothing was validated: a repeated key or a stale page
    assignment: Assignment
    repeated: bool = False  # the same key again: already applied
    stale: bool = False  # sent from a page older than the task: refused, nothing stored

    @property
    def late(self) -> bool:
        """Stored (or, when incomplete, would be stored) as a late submission: the slot went to someone
        else."""
        return self.assignment.status in (AssignmentStatus.LATE, AssignmentStatus.EXPIRED)


def next_assignment(labeler: AnyUser, *, now: datetime | None = None) -> Assignment | None:
    """The labeler's live lease, or a new one on an item of ``available_items``; None when nothing is
    left for them now (``progress.held_back`` tells whether work waits behind the same-question window)."""
    now = now or timezone.now()
    current = (
        Assignment.objects.filter(
            labeler=labeler, status=AssignmentStatus.LEASED, leased_until__gt=now, is_reference=False
        )
        .select_related("item__batch")
        .first()
    )
    # A state change ends the leases it no longer allows (``held_work``); one taken in a race with it is
    # not handed back either (its submit would be refused).
    if current is not None and not standing_refusal(current, labeler):
        return current
    reclaim_expired(now)
    with transaction.atomic():
        item = _pick_item(labeler, now)
        if item is None:
            return None
        batch = item.batch
        order = list(item.answers.order_by("id").values_list("id", flat=True))
        random.SystemRandom().shuffle(order)  # blinding: A/B and ranking order differ per assignment
        # Drawn before the row is written (its seed once held the new pk): one statement, not an insert
        # and an update.
        required_all = draw_required_all(f"{item.pk}:{labeler.pk}:{uuid.uuid4()}", batch.required_probability)
        assignment = Assignment.objects.create(
            item=item,
            labeler=labeler,
            order=order,
            required_all=required_all,
            leased_until=now + batch.lease,
            last_seen_at=now,
        )
        item.slots_taken += 1
        item.is_open = has_room(item)
        item.save(update_fields=["slots_taken", "is_open"])
    return assignment


def batch_turns(labeler: AnyUser, active: Mapping[int, int]) -> list[int]:
    """The batches ``active`` ({id: priority}, those the gate opens to this labeler) in the order this
    labeler is to be offered them: each batch's share of the labeler's tasks follows its priority (a batch
    of priority 2 comes up twice as often as one of 1), so active batches are interleaved instead of drained
    in id order. The batch with the fewest of this labeler's assignments per unit of priority is first; ties
    go to the older batch. Deterministic, and cheap: it counts the labeler's own assignments, never the
    pool, and not even those when there is one batch to offer."""
    if len(active) < 2:
        return list(active)
    taken = dict(
        Assignment.objects.filter(labeler=labeler, item__batch__in=list(active))
        .values_list("item__batch")
        .annotate(n=Count("pk"))
        .values_list("item__batch", "n")
    )
    return sorted(active, key=lambda pk: ((taken.get(pk, 0) + 1) / max(active[pk], 1), pk))


def _pick_item(labeler: AnyUser, now: datetime) -> FeedbackItem | None:
    # The gate read once, with the priorities: the pool queries below then compile a list, not its subquery.
    active = open_batch_priorities(labeler)
    if not active:
        return None
    pick = (
        available_items(labeler, now, list(active))
        .select_related("batch")
        .order_by("is_open", "batch_id", "id")
        .select_for_update(skip_locked=True, of=("self",))
    )
    for batch in batch_turns(labeler, active):
        item = pick.filter(batch_id=batch).first()
        if item is not None:
            return item
    return None


JUDGED = (AssignmentStatus.SUBMITTED, AssignmentStatus.LATE)


class OwnWork(NamedTuple):
    """What a labeler never judges: their own answers (from their demonstrations), and their own episodes
    (a step review of them)."""

    answers: list[int]
    episodes: list[int]


def eligible_items(
    labeler: AnyUser, open_ids: list[int] | None = None, *, own: OwnWork | None = None
) -> QuerySet[FeedbackItem]:
    """The items the labeler may be given, the same-question window aside: open, in an active batch the gate
    lets them take (``gate.open_batches``), never theirs before (whatever became of it), none of their own
    answers in it, not a review of their own episode. ``own``: ``own_work`` when the caller has read it
    already."""
    had_it = Assignment.objects.filter(item=OuterRef("pk"), labeler=labeler)
    allowed = open_batches(labeler) if open_ids is None else open_ids
    items = FeedbackItem.objects.filter(is_open=True, batch__in=allowed).filter(~Exists(had_it))
    own = own_work(labeler) if own is None else own
    if own.answers:
        links = FeedbackItem.answers.through.objects.filter(
            feedbackitem_id=OuterRef("pk"), answer_id__in=own.answers
        )
        items = items.filter(~Exists(links))
    if own.episodes:
        items = items.exclude(episode_id__in=own.episodes)
    return items


def own_work(labeler: AnyUser) -> OwnWork:
    """The labeler's own episodes and the answers made from them, in one query. Lists, not joins: with the
    join PostgreSQL misjudged how many items it removes and sorted the whole pool (250 ms at 100k items)
    instead of walking the index."""
    rows = list(Episode.objects.filter(user=labeler).order_by().values_list("id", "answers__id"))
    answers = sorted({answer for _, answer in rows if answer is not None})
    return OwnWork(answers, sorted({episode for episode, _ in rows}))


def recent_judgements(labeler: AnyUser, now: datetime) -> QuerySet[Assignment]:
    """The labeler's tasks that bias a later judgement of their question: the ones they hold, and the ones
    they submitted within FEEDBACK_SAME_QUESTION_WINDOW."""
    window = settings.FEEDBACK_SAME_QUESTION_WINDOW
    return Assignment.objects.filter(labeler=labeler).filter(
        Q(status=AssignmentStatus.LEASED) | Q(status__in=JUDGED, submitted_at__gt=now - window)
    )


def same_question_clash(labeler: AnyUser, now: datetime) -> Exists | None:
    """True for an item whose question is in one of the labeler's ``recent_judgements`` under another
    template or preset: the earlier judgement would bias this one (the same template again is another item
    of the same kind, not a second look from another angle). None when the window is 0. An Exists over the
    labeler's own assignments, so the pool is still walked by its index."""
    if not settings.FEEDBACK_SAME_QUESTION_WINDOW:
        return None
    return Exists(
        recent_judgements(labeler, now)
        .filter(item__question_id=OuterRef("question_id"))
        .exclude(
            item__batch__template=OuterRef("batch__template"), item__batch__preset=OuterRef("batch__preset")
        )
    )


def available_items(
    labeler: AnyUser, now: datetime, open_ids: list[int] | None = None, *, own: OwnWork | None = None
) -> QuerySet[FeedbackItem]:
    """What "next task" may hand the labeler now: the one rule for the page, the API and the counts of
    waiting work. ``open_ids``: the gate's batches when the caller has read them already; ``own``: as for
    ``eligible_items``."""
    items = eligible_items(labeler, open_ids, own=own)
    clash = same_question_clash(labeler, now)
    return items if clash is None else items.filter(~clash)


def reclaim_expired(now: datetime | None = None) -> int:
    """Return the slots of leases that ran out to the pool (the labeler can never get that item again)."""
    now = now or timezone.now()
    with transaction.atomic():
        expired = list(
            # A reference holds no slot (``references.start_reference``): nothing to give back.
            Assignment.objects.filter(
                status=AssignmentStatus.LEASED, leased_until__lt=now, is_reference=False
            )
            .select_for_update(skip_locked=True)
            .values_list("pk", "item_id")[:RECLAIM_BATCH]
        )
        if not expired:
            return 0
        Assignment.objects.filter(pk__in=[pk for pk, _ in expired]).update(status=AssignmentStatus.EXPIRED)
        for _, item_id in sorted(expired, key=lambda pair: pair[1]):
            release_slot(item_id)
    return len(expired)


def standing_refusal(assignment: Assignment, labeler: AnyUser) -> str:
    """Why the labeler's state no longer lets them change this task ("" when it does; a researcher's
    reference is theirs to revise at any time)."""
    if assignment.is_reference:
        return ""
    batch = assignment.item.batch
    return refusal(labeler, batch.template, batch.preset, batch.is_screening)


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
    # The question too: the task page shows the task keep_alive returns.
    return (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("item__batch", "item__question")
        .get(pk=assignment_id, labeler=labeler)
    )


def _touch(assignment: Assignment, now: datetime) -> None:
    if assignment.last_seen_at is not None and timedelta(0) <= now - assignment.last_seen_at <= IDLE_LIMIT:
        assignment.active_seconds += (now - assignment.last_seen_at).total_seconds()
    assignment.last_seen_at = now


def _retake(assignment: Assignment, now: datetime) -> bool:
    """Take an expired assignment's slot back if the item still has one free, so the labeler's work counts;
    False when someone else took it. The caller holds the assignment's lock (assignment, then item)."""
    batch = assignment.item.batch
    item = FeedbackItem.objects.select_for_update().select_related("batch").get(pk=assignment.item_id)
    if not has_room(item):
        return False
    item.slots_taken += 1
    item.is_open = has_room(item)
    item.save(update_fields=["slots_taken", "is_open"])
    assignment.status, assignment.leased_until = AssignmentStatus.LEASED, now + batch.lease
    return True


def _renew(assignment: Assignment, now: datetime) -> None:
    """Renew a lease while its labeler works. One that ran out but was not reclaimed yet still holds its
    slot (nobody else can have it); an expired one is taken back if its slot is free, and otherwise stays
    expired. Submitted, late and skipped assignments are left as they are."""
    if assignment.status == AssignmentStatus.EXPIRED and not _retake(assignment, now):
        return
    if assignment.status == AssignmentStatus.LEASED:
        assignment.leased_until = now + assignment.item.batch.lease
        _touch(assignment, now)


_LEASE_FIELDS = ["status", "leased_until", "active_seconds", "last_seen_at"]


def keep_alive(assignment_id: int, labeler: AnyUser, *, now: datetime | None = None) -> Assignment:
    """Renew the lease while the page is open. A lease that expired is taken back if its slot is still
    free; if someone else took it, TaskClosed (the page may still submit: the response is kept as late)."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if refused := standing_refusal(assignment, labeler):
            raise TaskClosed(refused)
        _renew(assignment, now)
        if assignment.status == AssignmentStatus.LEASED:
            assignment.save(update_fields=_LEASE_FIELDS)
    if assignment.status == AssignmentStatus.EXPIRED:
        raise TaskClosed(SLOT_GONE)
    return assignment


def save_draft(
    assignment_id: int,
    labeler: AnyUser,
    draft: dict,
    *,
    version: int | None = None,
    now: datetime | None = None,
) -> Assignment:
    """Keep the work in progress on the server and renew the lease. The draft is kept even when the slot
    went to someone else (a submit then stores it as late). Drafts never change ``version``, so a tab's
    own autosave never makes it stale; a draft from a page older than ``version`` is refused
    (TaskChanged), so a stale tab cannot overwrite what the task now holds."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if version is not None and version != assignment.version:
            raise TaskChanged(STALE_TASK)
        if assignment.status == AssignmentStatus.SKIPPED:
            raise TaskClosed("This task is closed.")
        if refused := standing_refusal(assignment, labeler):
            raise TaskClosed(refused)
        _renew(assignment, now)
        assignment.draft = draft
        assignment.save(update_fields=[*_LEASE_FIELDS, "draft"])
    return assignment


def answer_shapes(assignment: Assignment, answers: Mapping[int, Answer] | None = None) -> list[AnswerShape]:
    """The answers in the order shown, with what validation needs to know about them; ``answers``: the
    assignment's answers by id when the caller has read them already."""
    answers = Answer.objects.in_bulk(assignment.order) if answers is None else answers
    slot_names = _slot_names(len(assignment.order), assignment.item.batch.template)
    return [
        AnswerShape(slot=slot, text_length=len(answers[pk].text), quote_count=len(answers[pk].quotes))
        for slot, pk in zip(slot_names, assignment.order, strict=True)
    ]


def step_count(item: FeedbackItem) -> int:
    """The steps a step review of ``item`` rates: its episode's actions (0 for an item of answers)."""
    return EpisodeAction.objects.filter(episode_id=item.episode_id).count() if item.episode_id else 0


def _slot_names(count: int, template: str) -> list[str]:
    return ["A", "B"][:count] if template.endswith("comparison") else [str(i) for i in range(1, count + 1)]


def submit(
    assignment_id: int,
    labeler: AnyUser,
    response: dict,
    key: uuid.UUID,
    *,
    version: int | None = None,
    now: datetime | None = None,
    shapes: list[AnswerShape] | None = None,
) -> SubmitResult:
    """Validate and store the response. The same key again is a no-op; a page older than the task's
    ``version`` is refused (``stale``, nothing stored); a submitted task may be revised within the batch's
    revision window (the previous response is kept as a revision).

    After the lease ran out the work is never thrown away: the slot is taken back when it is free, and
    when someone else has it the response is stored as LATE (kept for researchers, left out of exports).
    An incomplete response is kept as the draft either way. ``shapes``: ``answer_shapes`` of this
    assignment when the caller has read them (its answers and their order never change)."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if assignment.submit_key == key:
            return SubmitResult(None, assignment, repeated=True)
        if version is not None and version != assignment.version:
            return SubmitResult(None, assignment, stale=True)
        if refused := standing_refusal(assignment, labeler):
            raise TaskClosed(refused)
        batch = assignment.item.batch
        if assignment.status in (AssignmentStatus.SUBMITTED, AssignmentStatus.LATE):
            # From the first submission: a revision must not reopen the window it was made in.
            if now > assignment.revisable_until:
                raise TaskClosed("The time to revise this task has passed.")
        elif assignment.status == AssignmentStatus.REFERENCE:
            pass  # a researcher's reference may be revised at any time
        elif assignment.status == AssignmentStatus.EXPIRED:
            _retake(assignment, now)  # still EXPIRED when the slot went to someone else: stored as late
        elif assignment.status != AssignmentStatus.LEASED:
            raise TaskClosed("This task is closed.")
        result = validate_response(
            batch.template,
            response,
            answers=answer_shapes(assignment) if shapes is None else shapes,
            required_all=assignment.required_all,
            always_required=batch.always_required,
            preset=batch.preset or None,
            steps=step_count(assignment.item),
        )
        assignment.draft = response
        _touch(assignment, now)
        if result.complete:
            _store(assignment, result, labeler, key, now)
        assignment.save()
        if result.complete:
            after_submit(assignment)
    return SubmitResult(result, assignment)


def _store(
    assignment: Assignment, result: Validation, labeler: AnyUser, key: uuid.UUID, now: datetime
) -> None:
    if assignment.status in (AssignmentStatus.SUBMITTED, AssignmentStatus.LATE, AssignmentStatus.REFERENCE):
        AssignmentRevision.objects.create(
            assignment=assignment,
            response=assignment.response,
            flags=assignment.flags,
            submitted_at=assignment.submitted_at,
        )
    late = assignment.status in (AssignmentStatus.EXPIRED, AssignmentStatus.LATE)
    clear_on_revision(assignment, result.cleaned, result.flags, labeler)
    assignment.response, assignment.flags = result.cleaned, list(result.flags)
    assignment.status = AssignmentStatus.LATE if late else AssignmentStatus.SUBMITTED
    if assignment.is_reference:
        assignment.status = AssignmentStatus.REFERENCE
    # The first submission is kept for good by the model's save: scoring and the revision window read it.
    assignment.submitted_at, assignment.submit_key = now, key
    assignment.version += 1
    log_action(labeler, "assignment.submit", assignment, flags=list(result.flags), late=late)


def skip(assignment_id: int, labeler: AnyUser, reason: str) -> None:
    """Give the task back with a reason; its slot returns to the pool for another labeler. A task whose
    lease expired is skipped all the same (its slot is already back in the pool): the reason is kept."""
    if not reason.strip():
        raise TaskClosed("Say why you skip this task.")
    with transaction.atomic():
        assignment = _locked(assignment_id, labeler)
        if assignment.status not in (AssignmentStatus.LEASED, AssignmentStatus.EXPIRED):
            raise TaskClosed("Only a task in progress can be skipped.")
        holds_slot = assignment.status == AssignmentStatus.LEASED and not assignment.is_reference
        assignment.status, assignment.skip_reason = AssignmentStatus.SKIPPED, reason.strip()
        assignment.version += 1
        assignment.save(update_fields=["status", "skip_reason", "version"])
        if holds_slot:
            release_slot(assignment.item_id)
        log_action(labeler, "assignment.skip", assignment, reason=reason.strip())
