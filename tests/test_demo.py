"""``load_demo``: demo users and questions, development only, idempotent."""

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from annotation.models import Question, QuestionImport
from webgpt_site.permissions import Role, user_roles

pytestmark = pytest.mark.django_db


def test_load_demo_refuses_when_debug_is_off(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="only runs with DEBUG=1"):
        call_command("load_demo")
    assert get_user_model().objects.count() == 0
    assert Question.objects.count() == 0


def test_load_demo_creates_the_demo_users_and_questions_once(settings):
    settings.DEBUG = True
    call_command("load_demo")
    counts = (Question.objects.count(), QuestionImport.objects.count(), get_user_model().objects.count())
    assert counts == (790 + 3000 + 393 + 381 + 12, 5, 4)
    expected_roles = {
        "demonstrator": {Role.DEMONSTRATOR},
        "labeler": {Role.LABELER},
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
