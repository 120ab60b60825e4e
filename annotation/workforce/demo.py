"""The workforce on ``make run``: the demo's accounts qualified for their work, a screening test for the
WebGPT comparison with the researcher's references, an applicant who meets it first, gold items among the
production minimal comparisons and a labeler whose gold accuracy on them has just tripped the automatic
pause, so a newcomer sees the whole journey. Idempotent."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.feedback.demo import PREFIX, demo_batch_name, loop_question_ids, neighbour_pairs
from annotation.feedback.demo_answers import QUALITIES, load_demo_answers
from annotation.models import Assignment, FeedbackBatch, FeedbackItem, Qualification, Template, work_kind
from annotation.workforce.references import start_reference
from annotation.workforce.states import State, qualify_for_role, state_of
from core.permissions import Role, has_role

SCREENING_NAME = f"{PREFIX}: screening test (WebGPT comparison)"
GOLD_BATCH = demo_batch_name(Template.MINIMAL_COMPARISON)  # the production batch that carries gold items
# Before issue 36 the gold items were a batch of their own at priority 5, so a new labeler's first tasks were
# gold checks of another kind than the work they came for. A demo database from then still has it: it is
# switched off (kept, with the drifter's judgements) when the production batch gets its gold items.
OLD_GOLD_NAME = f"{PREFIX}: gold checks (minimal comparison)"
SCREENING_ITEMS = 6
GOLD_ITEMS = 6
DEMO_REASON = "Demo account: qualified when the demo was loaded"
APPLICANT, DRIFTER = "applicant", "drifter"


def qualify_demo_accounts(usernames: list[str]) -> None:
    """The demo's labeler and demonstrator start qualified (as the upgrade qualifies people already working);
    only once: a later `make run` leaves a pause or revocation made since alone."""
    for user in get_user_model().objects.filter(username__in=usernames):
        if user.username == APPLICANT or Qualification.objects.filter(user=user).exists():
            continue
        for role in (Role.LABELER, Role.DEMONSTRATOR):
            if has_role(user, role):
                qualify_for_role(user, role, by=None, reason=DEMO_REASON)


def pairs_with_a_better_answer() -> list[list]:
    """Pairs of demo answers one quality step apart (complete/partial, ...): the better one is known."""
    kept = loop_question_ids()
    answers = [answer for answer in load_demo_answers() if answer.question_id not in kept]
    return neighbour_pairs(answers)


def _better_is_lower_id(pair: list) -> bool:
    rank = {quality: index for index, quality in enumerate(QUALITIES)}
    better = min(pair, key=lambda answer: rank[answer.source["quality"]])
    return better.pk == min(answer.pk for answer in pair)


def _response(task: Assignment, lower_id_better: bool, strength: str = "better") -> dict:
    first_is_lower = task.order[0] == min(task.order)
    side = "a" if first_is_lower == lower_id_better else "b"
    return {"ratings": {"overall": f"{side}_{strength}"}}


@transaction.atomic
def create_screening_test(researcher) -> FeedbackBatch | None:
    """The WebGPT-comparison screening test: six pairs whose better answer the researcher entered as the
    reference, on the task page's own path (start_reference, submit), with an explanation each."""
    if FeedbackBatch.objects.filter(name=SCREENING_NAME).exists():
        return None
    pairs = pairs_with_a_better_answer()[-SCREENING_ITEMS:]
    config = BatchSettings(
        name=SCREENING_NAME,
        template=Template.WEBGPT_COMPARISON,
        required_probability=0.0,
        instructions="A screening test: judge each pair as you would in real work. A researcher compares "
        "your judgements with theirs and qualifies you.",
    )
    batch = create_feedback_batch(researcher, config, pairs)
    batch.is_screening = True
    batch.save(update_fields=["is_screening"])
    for item, pair in zip(batch.items.order_by("id"), pairs, strict=True):
        task = start_reference(item, researcher)
        work.submit(
            task.pk, researcher, _response(task, _better_is_lower_id(pair), "much_better"), uuid.uuid4()
        )
        item.gold_explanation = (
            "The better answer says what the question asks and every claim in it is backed by its "
            "quotes; the other leaves part of the answer out or unsupported."
        )
        item.save(update_fields=["gold_explanation"])
    return batch


@transaction.atomic
def add_gold_checks(drifter) -> FeedbackBatch | None:
    """Gold items among the demo's production minimal comparisons, spread through the batch as real work
    carries them (a gold check looks like any other task of its kind, so it is no batch of its own, and
    comes up no sooner than the work around it): the better answer of each is known from the answers'
    quality, and a labeler under 60% after 3 gold judgements is paused. Then the drifter's careless
    judgements of three of them (the first shown always preferred, in four seconds each), submitted on the
    real path: their third wrong gold check pauses them. None when the batch has its gold items already."""
    batch = FeedbackBatch.objects.filter(name=GOLD_BATCH).first()
    if batch is None or batch.items.filter(is_gold=True).exists():
        return None
    batch.gold_min_items, batch.gold_threshold = 3, 0.6
    batch.save(update_fields=["gold_min_items", "gold_threshold"])
    items = list(batch.items.order_by("id"))
    gold = items[:: max(1, len(items) // GOLD_ITEMS)][:GOLD_ITEMS]
    for item in gold:
        item.is_gold = True
        item.gold_expected = {"preference": 1.0 if _better_is_lower_id(list(item.answers.all())) else -1.0}
        item.gold_explanation = "The better answer is complete and supported by its quotes."
        item.save(update_fields=["is_gold", "gold_expected", "gold_explanation"])
    FeedbackBatch.objects.filter(name=OLD_GOLD_NAME).update(is_active=False)
    # In a demo database from before, the old batch has paused the drifter already.
    if drifter is None or state_of(drifter, work_kind(batch.template, batch.preset)) != State.QUALIFIED:
        return batch
    now = timezone.now()
    for item in gold[:3]:
        item = FeedbackItem.objects.select_related("batch").get(pk=item.pk)
        # The drifter's lease on this item (the same rows next_assignment writes).
        order = sorted(item.answers.values_list("pk", flat=True))
        if item.gold_expected["preference"] > 0:
            order.reverse()  # shown worse answer first, and "A better" is their careless habit
        task = Assignment.objects.create(
            item=item, labeler=drifter, order=order, leased_until=now + batch.lease, last_seen_at=now
        )
        item.slots_taken += 1
        item.is_open = work.has_room(item)
        item.save(update_fields=["slots_taken", "is_open"])
        work.submit(
            task.pk,
            drifter,
            {"ratings": {"overall": "a_better"}},
            uuid.uuid4(),
            now=now + timedelta(seconds=4),
        )
    return batch
