"""The gate: until a person passes a kind's screening test they get only that test; once qualified, only the
real work; paused or revoked, nothing of that kind; and nobody gets a batch a routed judge run holds while it
judges (``judging.routing.holding_runs``). The one rule for the task page, the API, the counts of waiting
work and the demonstrations' "Next question"."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from annotation.judging.routing import holding_runs
from annotation.models import (
    DEMONSTRATION,
    Assignment,
    AssignmentStatus,
    DemonstrationBatch,
    Episode,
    EpisodeStatus,
    FeedbackBatch,
    Qualification,
    may_take,
    work_kind,
)
from annotation.models.workforce import work_kind_expression
from annotation.workforce.states import State, kind_label, states_of
from core.permissions import AnyUser


def takeable_batches() -> QuerySet[FeedbackBatch]:
    """The active batches no routed judge run holds (the hold is a subquery: still one statement)."""
    held = holding_runs().values("batch_id")
    return FeedbackBatch.objects.filter(is_active=True).exclude(pk__in=held)


def open_batches(labeler: AnyUser) -> QuerySet[FeedbackBatch]:
    """The active feedback batches the gate lets this labeler take items from (their ids, as a subquery:
    the pool's query stays one query, and the state is read in the same statement as the items)."""
    state = Qualification.objects.filter(user_id=labeler.pk, kind=OuterRef("kind")).values("state")[:1]
    batches = takeable_batches().annotate(
        kind=work_kind_expression(), state=Coalesce(Subquery(state), Value(State.APPLICANT.value))
    )
    return batches.filter(
        Q(is_screening=True, state=State.APPLICANT) | Q(is_screening=False, state=State.QUALIFIED)
    ).values("pk")


def open_batch_priorities(labeler: AnyUser) -> dict[int, int]:
    """The batches of ``open_batches`` with their priority, for the pick of a next task: the labeler's
    states and the active batches read in two plain queries and ``may_take`` applied here (the same batches,
    tested: the SQL form is for queries that embed it). Compiling that form's subqueries cost more Python
    than both queries together take (2.0 ms against 1.0 ms a call, and it still needed the priorities)."""
    return {pk: priority for pk, priority, _ in _open_batch_rows(labeler)}


def open_batch_kinds(labeler: AnyUser) -> dict[tuple[str, str], list[int]]:
    """The batches of ``open_batches`` by the kind of task they hand out, (template, preset) -> ids."""
    kinds: dict[tuple[str, str], list[int]] = {}
    for pk, _, kind in _open_batch_rows(labeler):
        kinds.setdefault(kind, []).append(pk)
    return kinds


def _open_batch_rows(labeler: AnyUser) -> list[tuple[int, int, tuple[str, str]]]:
    states = states_of(labeler)
    active = takeable_batches().values_list("pk", "priority", "template", "preset", "is_screening")
    return [
        (pk, priority, (template, preset))
        for pk, priority, template, preset, is_screening in active
        if may_take(states.get(work_kind(template, preset), State.APPLICANT), is_screening)
    ]


def refusal(person: AnyUser, template: str, preset: str, is_screening: bool) -> str:
    """Why the person's state for this kind of work stops them from drafting, submitting or revising a
    task (or an episode) of it now; "" when nothing does. The same rule as handing work out (``may_take``):
    a pause or a revocation ends what they hold and every later change of it."""
    kind = work_kind(template, preset)
    state = states_of(person).get(kind, State.APPLICANT)
    if may_take(state, is_screening):
        return ""
    label = kind_label(kind)
    if state == State.PAUSED:
        why = f"you are paused for {label}, so your work of this kind is on hold (see My quality)"
    elif state == State.REVOKED:
        why = f"a researcher has withdrawn {label} from you"
    elif is_screening:
        why = f"you are past the screening test for {label}: its answers stay as you submitted them"
    else:
        why = f"you are not qualified for {label}"
    return f"Not saved: {why}. Nothing you submitted before was changed."


def demonstration_state(user: AnyUser) -> str:
    return states_of(user).get(DEMONSTRATION, State.APPLICANT)


@dataclass(frozen=True)
class Notice:
    kind: str
    label: str
    state: str
    text: str


def notices(labeler: AnyUser) -> list[Notice]:
    """What the labeler's "Next task" page says about the gate, one line per kind of work that has an
    active batch and is not plain work: a screening test to take (or taken, waiting for a decision), no
    test yet, paused, revoked."""
    states = states_of(labeler)
    active = FeedbackBatch.objects.filter(is_active=True).values_list("template", "preset", "is_screening")
    kinds: dict[str, set[bool]] = {}
    for template, preset, is_screening in active:
        kinds.setdefault(work_kind(template, preset), set()).add(is_screening)
    screened = set(
        Assignment.objects.filter(
            labeler=labeler, item__batch__is_screening=True, status=AssignmentStatus.SUBMITTED
        ).values_list("item__batch__template", "item__batch__preset")
    )
    screened_kinds = {work_kind(template, preset) for template, preset in screened}
    lines = []
    for kind, screening in sorted(kinds.items()):
        state = states.get(kind, State.APPLICANT)
        text = _notice_text(state, has_test=True in screening, took_test=kind in screened_kinds)
        if text:
            lines.append(Notice(kind, kind_label(kind), state, text))
    return lines


def _notice_text(state: str, *, has_test: bool, took_test: bool) -> str:
    if state == State.PAUSED:
        return (
            "Paused: your recent accuracy on gold checks fell under the batch's threshold. "
            "See My quality; a researcher can reinstate you."
        )
    if state == State.REVOKED:
        return "A researcher has withdrawn this kind of work from you."
    if state != State.APPLICANT:
        return ""
    if has_test and took_test:
        return "Screening test: a researcher reviews your answers and decides; tasks left in it come first."
    if has_test:
        return "Start with the screening test: a researcher qualifies you for this kind of work by it."
    return "No screening test is open for this kind of work yet: a researcher has to qualify you."


def demonstration_notice(user: AnyUser) -> str:
    """What "Next question" says about the gate ("" for a qualified demonstrator)."""
    state = demonstration_state(user)
    tests = DemonstrationBatch.objects.filter(is_active=True, is_screening=True)
    took = Episode.objects.filter(user=user, batch__is_screening=True, status=EpisodeStatus.FINISHED).exists()
    text = _notice_text(state, has_test=tests.exists(), took_test=took)
    if state == State.PAUSED:
        return "Paused: a researcher has paused your demonstrations for now; see My quality."
    return text.replace("tasks left in it", "questions left in it")
