"""Acting on several feedback batches at once from the batch list (the form and the service; the view is
``console.batch_bulk``): pause, start, set priority. A new batch
from samples competes with every active batch for the labelers' next tasks, so a researcher who wants it
judged first pauses the others (or lowers their priority) in one step, not one page visit each."""

from __future__ import annotations

from django import forms
from django.db import transaction

from annotation.feedback.batches import PRIORITY, count_of, set_active, set_priority
from annotation.models import FeedbackBatch
from core.params import ModelIdsField
from core.permissions import AnyUser

ACTIONS = {"pause": "Pause", "start": "Start", "priority": "Set priority"}
PRIORITY_HELP = (
    f"Priority ({PRIORITY[0]} to {PRIORITY[1]}): each labeler's next tasks come from the active batches in "
    "proportion to their priorities (a batch of priority 2 comes up twice as often as one of 1); a paused "
    "batch hands out nothing, and its labelers' open tasks stay theirs."
)


class BulkForm(forms.Form):
    batches = ModelIdsField(
        queryset=FeedbackBatch.objects.none(),
        error_messages={"required": "Choose at least one batch."},
    )
    action = forms.ChoiceField(choices=list(ACTIONS.items()))
    # Not "priority": the new-batch form on the same page has that field.
    bulk_priority = forms.IntegerField(required=False, min_value=PRIORITY[0], max_value=PRIORITY[1])

    def __init__(self, *args: object, user: AnyUser, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["batches"].queryset = FeedbackBatch.objects.visible_to(user)

    def clean(self) -> dict[str, object]:
        data = super().clean()
        if data.get("action") == "priority" and data.get("bulk_priority") is None:
            self.add_error("bulk_priority", f"Give a priority from {PRIORITY[0]} to {PRIORITY[1]}.")
        return data


def apply(user: AnyUser, batches: list[FeedbackBatch], action: str, priority: int | None) -> str:
    """Do ``action`` to every batch (one transaction, an audit entry per change); what happened, in words."""
    with transaction.atomic():
        if action == "priority":
            for batch in batches:
                set_priority(user, batch, priority)
            return f"Priority set to {priority} for {count_of(len(batches), 'batch', 'batches')}."
        changed = sum(set_active(user, batch, action == "start") for batch in batches)
    done = "started" if action == "start" else "paused"
    unchanged = len(batches) - changed
    note = f" ({unchanged} already {'active' if action == 'start' else 'paused'})" if unchanged else ""
    return f"{count_of(changed, 'batch', 'batches').capitalize()} {done}{note}."
