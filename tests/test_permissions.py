"""Who sees which page: each role lands on its work, outsiders are refused, strangers sign in first."""

import re

import pytest
from django.urls import reverse

from annotation.questions.service import import_questions

pytestmark = pytest.mark.django_db

DEMONSTRATOR_PAGES = ["annotation:next_question"]
LABELER_PAGES = ["annotation:next_task"]
RESEARCHER_PAGES = ["console:home", "console:workers", "questions:list"]
ALL_PAGES = DEMONSTRATOR_PAGES + LABELER_PAGES + RESEARCHER_PAGES


@pytest.fixture
def question_and_report():
    report = import_questions(b'{"question": "Why is the sky blue?"}\n', filename="sky.jsonl")
    return report.questions.get(), report


def object_urls(question, report):
    return [
        reverse("questions:detail", args=[question.pk]),
        reverse("questions:import_detail", args=[report.pk]),
    ]


@pytest.mark.parametrize(
    ("who", "landing"),
    [("dana", "annotation:next_question"), ("bob", "annotation:next_task"), ("alice", "console:home")],
)
def test_home_sends_each_role_to_its_work(request, client_for, who, landing):
    response = client_for(request.getfixturevalue(who)).get(reverse("home"))
    assert response.status_code == 302
    assert response.url == reverse(landing)


def test_home_offers_a_choice_to_people_with_several_roles(client_for, alice, bob):
    alice.groups.add(*bob.groups.all())
    response = client_for(alice).get(reverse("home"))
    assert response.status_code == 200
    assert reverse("console:home") in response.content.decode()
    assert reverse("annotation:next_task") in response.content.decode()


def test_home_tells_people_without_a_role_what_to_do(client_for, charlie):
    response = client_for(charlie).get(reverse("home"))
    assert response.status_code == 200
    assert "no role yet" in response.content.decode()


@pytest.mark.parametrize(
    ("who", "allowed"),
    [("dana", DEMONSTRATOR_PAGES), ("bob", LABELER_PAGES), ("alice", RESEARCHER_PAGES), ("charlie", [])],
)
def test_each_role_opens_its_pages_and_is_refused_the_others(request, client_for, who, allowed):
    client = client_for(request.getfixturevalue(who))
    for name in ALL_PAGES:
        expected = 200 if name in allowed else 403
        assert client.get(reverse(name)).status_code == expected, (who, name)


def test_staff_admins_may_use_the_console(client_for, django_user_model):
    admin = django_user_model.objects.create_user("erin", password="x", is_staff=True)
    assert client_for(admin).get(reverse("console:home")).status_code == 200


def test_anonymous_visitors_are_sent_to_login(client_for, question_and_report):
    client = client_for(None)
    for url in [reverse("home")] + [reverse(name) for name in ALL_PAGES] + object_urls(*question_and_report):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login") + "?next="), url


@pytest.mark.parametrize("who", ["dana", "bob", "charlie"])
def test_objects_are_404_for_everyone_who_may_not_see_them(request, client_for, who, question_and_report):
    client = client_for(request.getfixturevalue(who))
    for url in object_urls(*question_and_report):
        assert client.get(url).status_code == 404, (who, url)


def test_researchers_open_questions_and_import_reports(client_for, alice, question_and_report):
    client = client_for(alice)
    for url in object_urls(*question_and_report):
        assert client.get(url).status_code == 200, url
    assert client.get(reverse("questions:detail", args=[999_999])).status_code == 404


def test_a_missing_object_and_a_hidden_one_look_the_same(client_for, dana, question_and_report):
    question, _ = question_and_report
    client = client_for(dana)
    hidden = client.get(reverse("questions:detail", args=[question.pk]))
    missing = client.get(reverse("questions:detail", args=[question.pk + 1000]))
    assert hidden.status_code == missing.status_code == 404
    # Same page, byte for byte, once the per-response (masked) CSRF tokens are set aside.
    token = re.compile(rb"[A-Za-z0-9]{64}")
    assert token.sub(b"", hidden.content) == token.sub(b"", missing.content)


def test_logout_needs_a_post_and_signs_out(client_for, alice):
    client = client_for(alice)
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("console:home")).status_code == 302
