"""The workforce as `make run` shows it: an applicant meets the screening test first, the drifter is paused
by their gold checks, the demo's labeler works as before."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.feedback import assignment as work
from annotation.models import AssignmentStatus, FeedbackBatch, QualificationEvent, QualificationState
from annotation.workforce.demo import GOLD_NAME, SCREENING_NAME
from annotation.workforce.screening import feedback_candidates
from annotation.workforce.states import state_of

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
    assert FeedbackBatch.objects.get(name=GOLD_NAME).items.filter(is_gold=True).count() == 6
    assert state_of(labeler, "webgpt_comparison") == QualificationState.QUALIFIED
    assert work.next_assignment(labeler).item.batch.is_screening is False
    assert feedback_candidates("webgpt_comparison") == []  # nobody has taken the test yet


def test_loading_the_demo_again_leaves_decisions_alone(demo_site, settings):
    from django.core.management import call_command

    from annotation.workforce.states import set_state

    labeler = get_user_model().objects.get(username="labeler")
    set_state(labeler, "ranking", QualificationState.PAUSED, by=None, reason="a researcher's pause")
    settings.DEBUG = True
    call_command("load_demo", "--no-reward-model", verbosity=0)
    assert state_of(labeler, "ranking") == QualificationState.PAUSED
    assert FeedbackBatch.objects.filter(name=SCREENING_NAME).count() == 1
