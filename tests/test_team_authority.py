"""Who may act on whose account (``workforce.authority``), from every door: the team page's actions, the team
API, invitation links and time-sheet corrections (page and API).

alice researches; erin researches and labels too; bob labels; sam is staff and labels; root is a superuser
(and labels, so he has a time sheet); admin is a superuser made with ``createsuperuser --noinput``, without a
password. A researcher acts only on people whose every role they could grant (labelers, demonstrators,
people without a role), and on staff and superusers only a superuser does; nobody acts on their own account.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Invitation, QualificationEvent, TimeCorrection
from annotation.workforce import invitations
from annotation.workforce.authority import NotYourCall
from annotation.workforce.states import State, state_of
from core.models import AuditEntry
from core.permissions import Role
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
COMPARISON = "webgpt_comparison"
PASSWORD = "a long unusual passphrase 71"


@pytest.fixture
def team(django_user_model, monkeypatch):
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    call_command("createsuperuser", "--noinput", username="admin", email="admin@example.org", verbosity=0)
    root = django_user_model.objects.create_superuser("root", password="root-pw")
    root.groups.add(Group.objects.get_or_create(name="labeler")[0])
    return {
        "alice": make_user(django_user_model, "alice", "researcher"),
        "erin": make_user(django_user_model, "erin", "researcher", "labeler"),
        "bob": make_user(django_user_model, "bob", "labeler"),
        "sam": make_user(django_user_model, "sam", "labeler", is_staff=True),
        "root": root,
        "admin": django_user_model.objects.get(username="admin"),
    }


def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def correction(person) -> dict:
    return {"user": person.username, "day": timezone.localdate().isoformat(), "minutes": 60, "reason": "x"}


# Every door where one person acts on another's account: the request ``actor`` sends about ``person``.
DOORS = {
    "state (page)": lambda actor, person: page(actor).post(
        reverse("console:team_state", args=[person.pk]),
        {"kind": COMPARISON, "action": "pause", "reason": "x"},
    ),
    "qualify for a role (page)": lambda actor, person: page(actor).post(
        reverse("console:team_qualify_role", args=[person.pk]), {"role": "labeler", "reason": "x"}
    ),
    "role (page)": lambda actor, person: page(actor).post(
        reverse("console:team_roles", args=[person.pk]), {"role": "demonstrator", "action": "grant"}
    ),
    "new link (page)": lambda actor, person: page(actor).post(reverse("console:team_link", args=[person.pk])),
    "state (API)": lambda actor, person: api(actor).post(
        f"/api/team/{person.pk}/state", {"kind": COMPARISON, "action": "pause", "reason": "x"}, format="json"
    ),
    "correction (page)": lambda actor, person: page(actor).post(
        reverse("console:timesheet_correct"), correction(person)
    ),
    "correction (API)": lambda actor, person: api(actor).post(
        reverse("api-timesheet-corrections"), correction(person), format="json"
    ),
}


def everything(person) -> tuple:
    """What any of the doors could change."""
    return (
        QualificationEvent.objects.count(),
        AuditEntry.objects.count(),
        TimeCorrection.objects.count(),
        Invitation.objects.count(),
        sorted(person.groups.values_list("name", flat=True)),
        state_of(person, COMPARISON),
    )


def said(response) -> str:
    if response["Content-Type"].startswith("application/json"):
        return response.json()["detail"]
    return response.content.decode()


# Taking over an administrator ---------------------------------------------------------------------------


def test_a_researcher_cannot_issue_a_link_for_a_superuser_without_a_password(team, client):
    alice, admin, root = team["alice"], team["admin"], team["root"]
    assert admin.is_superuser and not admin.has_usable_password()
    response = page(alice).post(reverse("console:team_link", args=[admin.pk]))
    assert response.status_code == 403
    assert "admin is a staff or superuser account: only a superuser may act on it." in said(response)
    assert (
        not Invitation.objects.exists() and not AuditEntry.objects.filter(action__startswith="team.").exists()
    )
    with pytest.raises(NotYourCall):
        invitations.renew(alice, admin)
    # A superuser may: the link sets admin's password.
    link = invitations.renew(root, admin)
    response = client.post(
        reverse("account:invite", args=[link.token]), {"password1": PASSWORD, "password2": PASSWORD}
    )
    assert response.status_code == 302


def test_a_researcher_cannot_issue_the_link_of_a_researcher_a_superuser_just_added(team, client):
    alice, erin, root = team["alice"], team["erin"], team["root"]
    gwen, first = invitations.add_person(root, "gwen", "", [Role.RESEARCHER])
    for researcher in (alice, erin):
        response = page(researcher).post(reverse("console:team_link", args=[gwen.pk]))
        assert response.status_code == 403
        assert "gwen has the researcher role: only a superuser may act on it." in said(response)
    assert Invitation.objects.get() == first.invitation
    assert client.get(reverse("account:invite", args=[first.token])).status_code == 200  # still gwen's
    assert page(root).post(reverse("console:team_link", args=[gwen.pk])).status_code == 200


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("target", ["erin", "sam", "root"])
def test_every_door_refuses_a_researcher_acting_on_a_researcher_or_an_administrator(team, door, target):
    person = team[target]
    before = everything(person)
    response = DOORS[door](team["alice"], person)
    assert response.status_code == 403
    assert f"{target} " in said(response) and "only a superuser may act on it." in said(response)
    assert everything(person) == before


@pytest.mark.parametrize("door", DOORS)
def test_a_researcher_acts_on_a_labeler_from_every_door(team, door):
    bob = team["bob"]
    invitations_before = Invitation.objects.count()
    response = DOORS[door](team["alice"], bob)
    if door == "new link (page)":  # bob has a password: nothing to renew, and the page says so
        assert response.status_code == 400 and "has a password already" in said(response)
        assert Invitation.objects.count() == invitations_before
    else:
        assert response.status_code in (200, 201, 302), said(response)[:300]


def test_a_researcher_may_not_withdraw_an_invitation_only_a_superuser_may_make(team, client):
    alice, root = team["alice"], team["root"]
    opened = invitations.invite(root, [Role.RESEARCHER], "a new colleague")
    _, accounts = invitations.add_person(root, "gwen", "", [Role.RESEARCHER])
    for link in (opened, accounts):
        pk = link.invitation.pk
        response = page(alice).post(reverse("console:team_withdraw_invitation", args=[pk]))
        assert response.status_code == 403 and "only a superuser may act on it." in said(response)
        response = api(alice).delete(reverse("api-team-invitation", args=[pk]))
        assert response.status_code == 403 and "researcher role" in said(response)
        assert client.get(reverse("account:invite", args=[link.token])).status_code == 200
    assert not AuditEntry.objects.filter(action="team.withdraw_invitation").exists()
    assert api(root).delete(reverse("api-team-invitation", args=[opened.invitation.pk])).status_code == 204


# Separation of duties -------------------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
def test_nobody_acts_on_their_own_account_from_any_door(team, door):
    erin = team["erin"]  # a researcher who labels: states, roles and a time sheet of her own
    before = everything(erin)
    response = DOORS[door](erin, erin)
    assert response.status_code == 403
    assert "Nobody changes their own roles, states or time sheet: ask a superuser." in said(response)
    assert everything(erin) == before


def test_a_researcher_cannot_make_herself_a_labeler_nor_a_superuser_change_himself(team):
    alice, root = team["alice"], team["root"]
    response = page(alice).post(
        reverse("console:team_roles", args=[alice.pk]), {"role": "labeler", "action": "grant"}
    )
    assert response.status_code == 403 and not alice.groups.filter(name="labeler").exists()
    assert "Nothing was changed." in said(response)
    response = DOORS["correction (API)"](root, root)
    assert response.status_code == 403 and "ask another superuser" in said(response)
    assert not TimeCorrection.objects.exists()


def test_a_superuser_acts_on_a_researcher_and_each_change_is_in_the_audit_trail(team):
    erin, root = team["erin"], team["root"]
    assert DOORS["state (API)"](root, erin).status_code == 200
    assert DOORS["role (page)"](root, erin).status_code == 302
    assert DOORS["correction (API)"](root, erin).status_code == 201
    assert state_of(erin, COMPARISON) == State.PAUSED and erin.groups.filter(name="demonstrator").exists()
    actions = set(AuditEntry.objects.filter(actor=root).values_list("action", flat=True))
    assert actions == {"qualification.change", "team.grant_role", "timesheet.correct"}
    person_page = page(root).get(reverse("console:team_person", args=[erin.pk])).content.decode()
    assert "team.grant_role demonstrator · root" in person_page


def test_the_person_page_offers_only_the_actions_the_researcher_may_take(team):
    alice = team["alice"]
    for name in ("admin", "erin", "alice"):
        response = page(alice).get(reverse("console:team_person", args=[team[name].pk]))
        content = response.content.decode()
        assert response.status_code == 200 and "No action is offered here:" in content
        assert (
            'name="action"' not in content
            and reverse("console:team_link", args=[team[name].pk]) not in content
        )
    content = page(alice).get(reverse("console:team_person", args=[team["bob"].pk])).content.decode()
    assert "No action is offered here" not in content and 'name="action" value="pause"' in content
