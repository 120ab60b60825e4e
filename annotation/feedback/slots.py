"""An item's slots: how many labelers it takes and giving a slot back. Kept apart from the lease service
(``assignment``) so that a state change (``workforce.states``), which ends a person's leases, can release
slots without importing the service that itself asks the gate (and so the states)."""

from __future__ import annotations

from annotation.models import FeedbackItem


def has_room(item: FeedbackItem) -> bool:
    """Whether the item takes another labeler: a screening item takes every applicant; any other item
    ``target_overlap`` labelers (the batch's overlap, plus those asked for on disagreement)."""
    return item.batch.is_screening or item.slots_taken < item.target_overlap


def release_slot(item_id: int) -> None:
    """Give one slot of the item back to the pool. The caller holds the assignment's lock (locks are taken
    assignment first, then item)."""
    item = FeedbackItem.objects.select_for_update().get(pk=item_id)
    item.slots_taken = max(0, item.slots_taken - 1)
    item.is_open = True
    item.save(update_fields=["slots_taken", "is_open"])
