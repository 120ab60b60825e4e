"""Qualification states per person and kind of work, and every change to them with its audit event."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.feedback.scales import RATING_PRESET_CHOICES, TEMPLATES
from annotation.models import (
    DEMONSTRATION,
    Qualification,
    QualificationEvent,
    QualificationState,
    work_kind,
)
from annotation.models.workforce import RATING_PREFIX
from annotation.workforce.held_work import end_held_work
from core.models import log_action
from core.permissions import AnyUser, Role

State = QualificationState


def feedback_kinds() -> list[str]:
    """Every kind of feedback work: each template, and each rating preset as a kind of its own."""
    kinds = [template for template, _ in TEMPLATES if template != "rating"]
    return kinds + [work_kind("rating", preset) for preset, _ in RATING_PRESET_CHOICES]


def all_kinds() -> list[str]:
    """Every kind of work there is: the feedback kinds, then demonstrations."""
    return [*feedback_kinds(), DEMONSTRATION]


def kinds_for(role: Role) -> list[str]:
    """The kinds of work a role does: labelers every feedback kind, demonstrators demonstrations."""
    return {Role.LABELER: feedback_kinds(), Role.DEMONSTRATOR: [DEMONSTRATION]}.get(role, [])


def kind_label(kind: str) -> str:
    """How a kind of work reads on a page: "WebGPT comparison", "Rating (GopherCite...)", "Demonstrations"."""
    if kind == DEMONSTRATION:
        return "Demonstrations"
    if kind.startswith(RATING_PREFIX):
        preset = kind.removeprefix(RATING_PREFIX)
        label = dict(RATING_PRESET_CHOICES).get(preset, preset)
        return f"Rating ({label})"
    return dict(TEMPLATES).get(kind, kind)


def states_of(user: AnyUser) -> dict[str, str]:
    """The person's state per kind of work they have a row for (a kind without one: applicant)."""
    if not user.is_authenticated:
        return {}
    return dict(Qualification.objects.filter(user=user).values_list("kind", "state"))


def state_of(user: AnyUser, kind: str) -> str:
    return states_of(user).get(kind, State.APPLICANT)


# Which changes a researcher may make from each state; the platform itself only pauses (gold checks).
ALLOWED = {
    State.APPLICANT: {State.QUALIFIED, State.REVOKED},
    State.QUALIFIED: {State.PAUSED, State.REVOKED},
    State.PAUSED: {State.QUALIFIED, State.REVOKED},
    State.REVOKED: {State.QUALIFIED, State.APPLICANT},
}
ACTION_STATES = {
    "qualify": State.QUALIFIED,
    "pause": State.PAUSED,
    "reinstate": State.QUALIFIED,
    "revoke": State.REVOKED,
    "reset": State.APPLICANT,
}
# An action named for its start: reinstating is for someone paused or revoked. An applicant is qualified
# ("qualify", with their screening result beside it), never reinstated past the screening test.
ACTION_FROM = {"reinstate": {State.PAUSED, State.REVOKED}}


class StateError(ValueError):
    """A change the current state does not allow, or one without a reason."""


def _check_allowed(kind: str, from_state: str, to_state: str, action: str | None = None) -> None:
    if action in ACTION_FROM and from_state not in ACTION_FROM[action]:
        raise StateError(
            f"{kind_label(kind)}: only a paused or revoked person is reinstated; a person who is "
            f"{State(from_state).label.lower()} is qualified (after their screening test) instead."
        )
    if to_state not in ALLOWED[State(from_state)]:
        raise StateError(
            f"{kind_label(kind)}: a person who is {State(from_state).label.lower()} cannot become "
            f"{State(to_state).label.lower()}."
        )


def set_state(
    user: AnyUser,
    kind: str,
    to_state: str,
    *,
    by: AnyUser | None,
    reason: str,
    figures: dict[str, Any] | None = None,
    exclude_work: bool = False,
    action: str | None = None,
    now: datetime | None = None,
) -> Qualification:
    """Change one person's state for one kind of work and record it (who, when, why, on what figures).
    ``exclude_work`` (revocations only) leaves their work of that kind first submitted until now out of
    exports. ``action`` (of ``ACTION_STATES``), when the change was asked for by name, must suit the current
    state too. The work they hold that the new state does not let them take is ended at once
    (``held_work``). StateError when the change is not allowed from the current state or the reason is
    blank."""
    now = now or timezone.now()
    reason = reason.strip()
    if not reason:
        raise StateError("Say why: the reason is kept in the audit trail.")
    if exclude_work and to_state != State.REVOKED:
        raise StateError("Work is excluded from exports only with a revocation.")
    # Checked before anything is written too: the row made for a refused change would be rolled back,
    # yet a write all the same (the fuzz test counts it).
    current = Qualification.objects.filter(user=user, kind=kind).values_list("state", flat=True).first()
    _check_allowed(kind, current or State.APPLICANT, to_state, action)
    with transaction.atomic():
        row, _ = Qualification.objects.select_for_update().get_or_create(user=user, kind=kind)
        _check_allowed(kind, row.state, to_state, action)  # again under the lock: it may have changed since
        QualificationEvent.objects.create(
            user=user,
            kind=kind,
            from_state=row.state,
            to_state=to_state,
            by=by,
            reason=reason,
            figures=figures or {},
        )
        row.state, row.reason, row.decided_at = to_state, reason, now
        row.decided_by = by if by is not None and by.is_authenticated else None
        if exclude_work:
            row.work_excluded_before = now
        row.save()
        log_action(by, "qualification.change", row, kind=kind, state=to_state, reason=reason)
        end_held_work(user, kind, to_state, by=by, reason=reason, now=now)
    return row


def qualify_for_role(user: AnyUser, role: Role, *, by: AnyUser | None, reason: str) -> None:
    """Qualify a person for every kind of their role's work at once (a researcher's call, e.g. someone whose
    work they know; also the demo's accounts). Kinds they are already qualified for are left alone. Kinds
    without a row yet (applicants) are written in bulk, with their events and one audit entry."""
    reason = reason.strip()
    if not reason:
        raise StateError("Say why: the reason is kept in the audit trail.")
    now = timezone.now()
    decider = by if by is not None and by.is_authenticated else None
    with transaction.atomic():
        current = dict(
            Qualification.objects.select_for_update().filter(user=user).values_list("kind", "state")
        )
        new = [kind for kind in kinds_for(role) if kind not in current]
        Qualification.objects.bulk_create(
            Qualification(
                user=user, kind=kind, state=State.QUALIFIED, reason=reason, decided_by=decider, decided_at=now
            )
            for kind in new
        )
        QualificationEvent.objects.bulk_create(
            QualificationEvent(
                user=user,
                kind=kind,
                from_state=State.APPLICANT,
                to_state=State.QUALIFIED,
                by=decider,
                reason=reason,
            )
            for kind in new
        )
        if new:
            log_action(by, "qualification.change", user, kinds=new, state=State.QUALIFIED, reason=reason)
        for kind in new:  # a screening task or episode they held is over: they do the real work now
            end_held_work(user, kind, State.QUALIFIED, by=by, reason=reason, now=now)
        for kind, state in current.items():
            if kind in kinds_for(role) and state != State.QUALIFIED:
                set_state(user, kind, State.QUALIFIED, by=by, reason=reason, now=now)
