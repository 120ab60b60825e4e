"""The work a person holds when their state for a kind of work changes: leases of feedback tasks and open
demonstration episodes their new state no longer lets them take are ended at once, so a paused or revoked
person cannot finish (and submit) what they held, and the slot or question goes back to others.

Nothing they did is thrown away: an ended task keeps its draft (status expired, as a lease that ran out;
reinstated, they may take it back while its slot is free), an ended episode its actions (status skipped,
with the reason)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db.models import Q

from annotation.feedback.slots import release_slot
from annotation.models import DEMONSTRATION, Assignment, AssignmentStatus, Episode, EpisodeStatus, may_take
from annotation.models.workforce import work_kind_expression
from core.models import log_action
from core.permissions import AnyUser


def end_held_work(
    user: AnyUser, kind: str, state: str, *, by: AnyUser | None, reason: str, now: datetime
) -> int:
    """End the person's live work of ``kind`` that their new ``state`` does not let them take
    (``may_take``; ``by``: who changed the state, None for the platform); the number ended. Called inside
    the state change's transaction."""

    def takes(is_screening: bool) -> bool:
        return may_take(state, is_screening)

    if kind == DEMONSTRATION:
        return _end_episodes(user, takes, by=by, reason=reason, now=now)
    return _end_leases(user, kind, takes, by=by, reason=reason)


def _end_leases(
    user: AnyUser, kind: str, takes: Callable[[bool], bool], *, by: AnyUser | None, reason: str
) -> int:
    ended_flags = [is_screening for is_screening in (True, False) if not takes(is_screening)]
    held = (
        Assignment.objects.filter(
            labeler=user,
            status=AssignmentStatus.LEASED,
            is_reference=False,
            item__batch__is_screening__in=ended_flags,
        )
        .annotate(kind=work_kind_expression("item__batch__"))
        .filter(kind=kind)
        # Assignment first, then item: the lock order of every lease change (``feedback.assignment``).
        # Skipping a locked one: a submit or draft is in flight, made before this change (waiting for it
        # could deadlock with a gold check, which locks the task, then the state). Every later change of
        # it is refused, and its slot comes back when its lease runs out.
        .select_for_update(of=("self",), skip_locked=True)
        .order_by("item_id")
    )
    ended = list(held)
    for task in ended:
        task.status = AssignmentStatus.EXPIRED
        task.save(update_fields=["status"])
        release_slot(task.item_id)
        log_action(by, "assignment.end_lease", task, reason=reason)
    return len(ended)


def _end_episodes(
    user: AnyUser, takes: Callable[[bool], bool], *, by: AnyUser | None, reason: str, now: datetime
) -> int:
    ended_by_batch = Q(pk__in=[])
    if not takes(True):
        ended_by_batch |= Q(batch__is_screening=True)
    if not takes(False):
        # An episode outside any batch (the bc split's fallback) is real work, as in a batch that is no test.
        ended_by_batch |= Q(batch__isnull=True) | Q(batch__is_screening=False)
    held = Episode.objects.human().open().filter(ended_by_batch, user=user)
    episodes = list(held.select_for_update(of=("self",), skip_locked=True))  # as the leases above
    for episode in episodes:
        episode.status, episode.finished_at = EpisodeStatus.SKIPPED, now
        episode.note = f"Ended by a change of state: {reason}"
        episode.version += 1
        episode.save(update_fields=["status", "finished_at", "note", "version"])
        log_action(by, "episode.end", episode, reason=reason)
    return len(episodes)
