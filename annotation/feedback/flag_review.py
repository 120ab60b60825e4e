"""Researchers' review of flagged judgements: keep one, or exclude it from exports and results.

A judgement is flagged when its labeler's ratings contradict each other (``validation_comparison``'s
``contradiction_flags``). Every decision is kept as a ``FlagReview`` row and the latest is copied to
``Assignment.flag_decision``, the one field exports and results read. A later decision replaces the current
one. A revision by the labeler that changes the response clears the decision: the researcher judged the
old response, not the new one, so it is back to "not reviewed" (recorded in the audit log, with why).

The page, the API and any script decide through ``check_decision`` and ``decide``: one rule for all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from annotation.feedback.validation_comparison import OVERALL_CONTRADICTS, OVERALL_EQUAL_BUT_AGREE
from annotation.models import Assignment, AssignmentStatus, FeedbackBatch, FlagDecision, FlagReview
from core.models import log_action
from core.permissions import AnyUser

MAX_NOTE = 2000
DECIDED = "assignment.flag_decision"
CLEARED = "assignment.flag_decision_cleared"
CLEARED_BY_REVISION = "The labeler revised the response after the decision: it is not reviewed again."

# Which flagged judgements a list shows ("open": those nobody has decided on yet).
SHOWN = (
    ("open", "Not reviewed"),
    ("keep", "Kept"),
    ("exclude", "Excluded"),
    ("all", "All"),
)
DEFAULT_SHOWN = "open"
STATES = {"": "Not reviewed", FlagDecision.KEEP: "Kept", FlagDecision.EXCLUDE: "Excluded from exports"}

REASONS = {
    OVERALL_CONTRADICTS: (
        "The overall rating prefers one answer, but the per-dimension ratings favour only the other one "
        "(or call them equal)."
    ),
    OVERALL_EQUAL_BUT_AGREE: (
        "The overall rating says the answers are equally good, but every rated dimension favours the same "
        "answer."
    ),
}


class FlagReviewError(ValueError):
    """A decision that cannot be recorded; ``field`` names the input at fault. Nothing was changed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def reason_words(flags: Iterable[Any]) -> list[str]:
    """The flags of a judgement as sentences (an unknown flag as it is stored)."""
    return [REASONS.get(str(flag), str(flag)) for flag in flags]


def check_decision(decision: Any, note: Any) -> tuple[str, str]:
    """The decision ("keep" or "exclude") and the note (stripped), or FlagReviewError: the one check of
    the page's form and the API's body."""
    if decision not in FlagDecision.values:
        choices = " or ".join(f"{code!r} ({label})" for code, label in FlagDecision.choices)
        raise FlagReviewError("decision", f"The decision is {choices}, not {str(decision)[:40]!r}.")
    note = "" if note is None else note
    if not isinstance(note, str):
        raise FlagReviewError("note", "The note must be text.")
    if "\x00" in note:  # PostgreSQL cannot store it
        raise FlagReviewError("note", "The note contains a NUL character.")
    if len(note) > MAX_NOTE:
        raise FlagReviewError("note", f"The note is too long ({len(note)} characters; at most {MAX_NOTE}).")
    return decision, note.strip()


def flagged(batch: FeedbackBatch) -> QuerySet[Assignment]:
    """The batch's flagged judgements: submitted (late ones are never exported) with at least one flag."""
    return Assignment.objects.filter(item__batch=batch, status=AssignmentStatus.SUBMITTED).exclude(flags=[])


def shown(batch: FeedbackBatch, which: str) -> QuerySet[Assignment]:
    """The flagged judgements a list shows (``SHOWN``), oldest submission first."""
    tasks = flagged(batch).order_by("submitted_at", "id")
    if which == "open":
        return tasks.filter(flag_decision="")
    if which in FlagDecision.values:
        return tasks.filter(flag_decision=which)
    return tasks


def flag_counts(batch: FeedbackBatch) -> dict[str, int]:
    """How many flagged judgements there are in all, not reviewed, kept and excluded (one query)."""
    return flagged(batch).aggregate(
        all=Count("id"),
        open=Count("id", filter=Q(flag_decision="")),
        keep=Count("id", filter=Q(flag_decision=FlagDecision.KEEP)),
        exclude=Count("id", filter=Q(flag_decision=FlagDecision.EXCLUDE)),
    )


def decide(assignment_id: int, reviewer: AnyUser, decision: Any, note: Any = "") -> FlagReview:
    """Record a decision on a flagged judgement; it replaces the current one (the earlier stay as rows).
    The assignment's row lock keeps a labeler's revision from landing between the check that it is
    flagged and the write: a decision is always about the response it was made on."""
    decision, note = check_decision(decision, note)
    with transaction.atomic():
        assignment = Assignment.objects.select_for_update().filter(pk=assignment_id).first()
        if assignment is None:
            raise FlagReviewError("assignment", f"There is no judgement {assignment_id}.")
        if assignment.status != AssignmentStatus.SUBMITTED or not assignment.flags:
            raise FlagReviewError(
                "assignment",
                f"Judgement {assignment_id} is not flagged for review (only flagged, submitted judgements "
                "are reviewed; a revision may have cleared its flags).",
            )
        previous = assignment.flag_decision
        review = FlagReview.objects.create(
            assignment=assignment, decision=decision, note=note, reviewer=reviewer
        )
        assignment.flag_decision = decision
        assignment.save(update_fields=["flag_decision"])
        log_action(reviewer, DECIDED, assignment, decision=decision, note=note, previous=previous)
    return review


def clear_on_revision(
    assignment: Assignment, response: Mapping[str, Any], flags: Sequence[str], labeler: AnyUser
) -> None:
    """Before a revision is stored (the caller holds the assignment's lock and saves it): a decision made
    on the old response no longer holds when the response changed, or when the judgement is no longer
    flagged; an identical resubmission keeps it."""
    if not assignment.flag_decision or (response == assignment.response and list(flags)):
        return
    log_action(
        labeler,
        CLEARED,
        assignment,
        previous=assignment.flag_decision,
        reason=CLEARED_BY_REVISION,
        flags=list(flags),
    )
    assignment.flag_decision = ""
