"""``load_demo``: demo users and questions, and the demo's reward model queued for the training worker;
development only, idempotent."""

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from annotation.models import Answer, Export, ExportFormat, FeedbackBatch, Question, QuestionImport
from core.permissions import Role, user_roles
from training.demo import DEMO_RM_LOG, DEMO_RM_PRESET, DEMO_RM_SETTINGS
from training.models import RunKind, RunStatus, TrainingRun
from training.runs.data import read_rows

pytestmark = pytest.mark.django_db


def test_load_demo_refuses_when_debug_is_off(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="only runs with DEBUG=1"):
        call_command("load_demo")
    assert get_user_model().objects.count() == 0
    assert Question.objects.count() == 0


def test_load_demo_creates_the_demo_users_and_questions_once(settings, tmp_path):
    settings.DEBUG = True
    settings.MEDIA_ROOT = tmp_path / "media"
    call_command("load_demo")
    counts = (Question.objects.count(), QuestionImport.objects.count(), get_user_model().objects.count())
    assert counts == (790 + 3000 + 393 + 381 + 12, 5, 6)
    expected_roles = {
        "demonstrator": {Role.DEMONSTRATOR},
        "labeler": {Role.LABELER},
        "applicant": {Role.LABELER},
        "drifter": {Role.LABELER},
        "researcher": {Role.RESEARCHER},
        "admin": {Role.RESEARCHER},  # staff may use the console
    }
    sign_in = RequestFactory().post("/accounts/login/")  # the login lockout counts per request
    for username, roles in expected_roles.items():
        user = authenticate(sign_in, username=username, password=username)
        assert user is not None, username
        assert user_roles(user) == roles
    assert authenticate(sign_in, username="admin", password="admin").is_superuser

    call_command("load_demo")
    assert (
        Question.objects.count(),
        QuestionImport.objects.count(),
        get_user_model().objects.count(),
    ) == counts
    assert TrainingRun.objects.count() == 1  # the demo reward model is queued once
    # The demo batches and their FreshWiki answers (tests/test_demo_answers.py) are made once too.
    # Six batches, one per template and preset (gold items among the minimal comparisons), then the
    # workforce's screening test.
    # A batch per template and rating preset (the step preference's of the step review's clicks), and the
    # screening test.
    assert FeedbackBatch.objects.filter(name__startswith="FreshWiki demo: ").count() == 9
    assert Answer.objects.filter(source__dataset="freshwiki_demo_answers").count() == 48


def test_load_demo_queues_a_fast_reward_model_on_the_demo_comparisons(settings, tmp_path):
    """An rm-pairs export of the rm split's TruthfulQA reference comparisons, made here, and a fast
    reward-model run on it for the training worker (the test's transaction never commits: nothing is sent
    to a broker), owned by the demo researcher and named in its log."""
    settings.DEBUG = True
    settings.MEDIA_ROOT = tmp_path / "media"
    call_command("load_demo")
    run = TrainingRun.objects.select_related("export", "owner").get()
    assert (run.kind, run.status, run.preset, run.owner.username) == (
        RunKind.RM,
        RunStatus.QUEUED,
        DEMO_RM_PRESET,
        "researcher",
    )
    assert run.log == DEMO_RM_LOG and DEMO_RM_SETTINGS.items() <= run.config.items()
    export = run.export
    assert (export.export_format, export.status, export.filters["split"]) == (
        ExportFormat.RM_PAIRS,
        "done",
        "rm",
    )
    rows = read_rows(tmp_path / "media" / "exports" / export.file_name)
    assert len(rows) == export.row_count > 100
    assert set(
        Question.objects.filter(pk__in={r["question_id"] for r in rows}).values_list("split", flat=True)
    ) == {"rm"}
    # A failed demo run is replaced at the next start; a queued, running or finished one is kept.
    TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    call_command("load_demo", "--no-reward-model")  # for what does not need it (most tests of the demo)
    assert TrainingRun.objects.count() == 1 and Export.objects.count() == 1
    call_command("load_demo")
    assert TrainingRun.objects.count() == 2 and Export.objects.count() == 2
