"""The workforce as `make run` shows it: an applicant meets the screening test first, the drifter is paused
by their gold checks, which are among the production work of their kind, the demo's labeler works as
before."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.feedback import assignment as work
from annotation.models import (
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    QualificationEvent,
    QualificationState,
)
from annotation.workforce.demo import GOLD_BATCH, SCREENING_NAME
from annotation.workforce.screening import feedback_candidates
from annotation.workforce.states import state_of
from tests.conftest import demo_production_batches, make_user

pytestmark = pytest.mark.django_db


def test_the_demo_shows_the_workforce_journey(demo_site):
    User = get_user_model()
    applicant, drifter, labeler = (User.objects.get(username=n) for n in ("applicant", "drifter", "labeler"))
    screening = FeedbackBatch.objects.get(name=SCREENING_NAME)
    assert screening.is_screening
    assert screening.items.filter(is_gold=True).count() == screening.items.count() == 6
    assert screening.items.filter(assignments__status=AssignmentStatus.REFERENCE).count() == 6
    task = work.next_assignment(applicant)
    assert task.item.batch == screening
    assert state_of(drifter, "minimal_comparison") == QualificationState.PAUSED
    event = QualificationEvent.objects.filter(user=drifter, to_state="paused").get()
    assert event.by is None and event.figures["accuracy"] == 0.0 and event.figures["count"] == 3
    assert event.figures["batch"] == FeedbackBatch.objects.get(name=GOLD_BATCH).pk
    assert state_of(labeler, "webgpt_comparison") == QualificationState.QUALIFIED
    assert work.next_assignment(labeler).item.batch.is_screening is False
    assert feedback_candidates("webgpt_comparison") == []  # nobody has taken the test yet


def test_gold_items_are_among_the_production_work_of_their_kind_and_come_up_no_sooner(
    demo_site, django_user_model
):
    gold = FeedbackBatch.objects.get(name=GOLD_BATCH)
    assert gold.template == "minimal_comparison" and not gold.is_screening
    assert FeedbackItem.objects.filter(is_gold=True, batch__is_screening=False).count() == 6
    assert gold.items.filter(is_gold=True).count() == 6 < gold.items.count()
    assert set(demo_production_batches().values_list("priority", flat=True)) == {1}
    # A new labeler's first task is the oldest production batch's, a WebGPT comparison; the gold checks
    # come up with the minimal comparisons, in their turn.
    newcomer = make_user(django_user_model, "newcomer", "labeler")
    first = work.next_assignment(newcomer)
    assert (first.item.batch.template, first.item.is_gold) == ("webgpt_comparison", False)


def test_loading_the_demo_again_leaves_decisions_alone(demo_site, settings):
    from django.core.management import call_command

    from annotation.workforce.states import set_state

    labeler = get_user_model().objects.get(username="labeler")
    set_state(labeler, "ranking", QualificationState.PAUSED, by=None, reason="a researcher's pause")
    settings.DEBUG = True
    call_command("load_demo", "--no-reward-model", verbosity=0)
    assert state_of(labeler, "ranking") == QualificationState.PAUSED
    assert FeedbackBatch.objects.filter(name=SCREENING_NAME).count() == 1
