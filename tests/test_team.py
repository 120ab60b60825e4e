"""The team page, each person's page and their actions, invitations, the team API and ``manage.py qualify``.

alice researches, bob labels, dana demonstrates, charlie has no role; root is a superuser. bob and dana are
applicants unless a test says otherwise (states are made by hand with ``set_state``)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import (
    ActiveKind,
    ActiveSpan,
    Assignment,
    Episode,
    EpisodeKind,
    EpisodeStatus,
    FeedbackItem,
    Invitation,
    Qualification,
    QualificationEvent,
    TimeCorrection,
)
from annotation.questions.service import import_questions
from annotation.workforce import invitations
from annotation.workforce.states import (
    ACTION_STATES,
    ALLOWED,
    State,
    kind_label,
    kinds_for,
    set_state,
    state_of,
)
from annotation.workforce.team import last_activity, screening_results
from annotation.workforce.team_views import BUTTONS
from core.models import AuditEntry
from core.permissions import Role
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
COMPARISON = "webgpt_comparison"
PASSWORD = "a long unusual passphrase 71"


@pytest.fixture
def team(django_user_model):
    return {
        "alice": make_user(django_user_model, "alice", "researcher"),
        "bob": make_user(django_user_model, "bob", "labeler", applicant=True),
        "dana": make_user(django_user_model, "dana", "demonstrator", applicant=True),
        "charlie": make_user(django_user_model, "charlie"),
        "root": django_user_model.objects.create_superuser("root", password="root-pw"),
    }


def signed_in(user) -> object:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def api(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def gold_judgements(alice, labeler, agrees: list[bool], active_seconds: float = 0.0) -> list[Assignment]:
    """One gold comparison item per entry (the reference prefers the answer with the lower id), judged by
    ``labeler``: agreeing (a_better, shown in id order) or not (b_better), in ``active_seconds`` each (on
    the time sheet: one after another from today's midnight)."""
    texts = [f"Gold question {n}?" for n in range(len(agrees))]
    import_questions("\n".join(json.dumps({"question": text}) for text in texts).encode(), filename="g.jsonl")
    rows = [
        {"question": text, "answer": f"{text} answer {side}", "source": {"model": "m"}}
        for text in texts
        for side in "ab"
    ]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings("gold batch", COMPARISON, required_probability=0.0)
    batch = create_feedback_batch(alice, config, group_answers(answers, COMPARISON))
    tasks = []
    now = timezone.now()
    for item, agree in zip(batch.items.order_by("id"), agrees, strict=True):
        FeedbackItem.objects.filter(pk=item.pk).update(is_gold=True, gold_expected={"preference": 1.0})
        order = sorted(item.answers.values_list("id", flat=True))
        tasks.append(
            Assignment.objects.create(
                item=item,
                labeler=labeler,
                order=order,
                status="submitted",
                response={"ratings": {"overall": "a_better" if agree else "b_better"}},
                submitted_at=now - timedelta(hours=2),
                leased_until=now,
                active_seconds=active_seconds,
            )
        )
    if active_seconds:
        midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
        worked = timedelta(seconds=active_seconds * len(agrees))
        ActiveSpan.objects.create(
            user=labeler, kind=ActiveKind.TASK, started_at=midnight, ended_at=midnight + worked
        )
    return tasks


# The team page ----------------------------------------------------------------------------------------


def test_the_team_page_lists_states_gold_accuracy_hours_and_last_activity(team):
    alice, bob, dana = team["alice"], team["bob"], team["dana"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=alice, reason="passed the screening test")
    set_state(bob, "ranking", State.QUALIFIED, by=alice, reason="passed")
    set_state(bob, "ranking", State.PAUSED, by=None, reason="gold accuracy fell")
    set_state(dana, "demonstration", State.REVOKED, by=alice, reason="copied answers")
    # 2 of 3 gold items agree: 2/3, Wilson 95% interval (by hand, z = 1.96): 0.2077 to 0.9385.
    tasks = gold_judgements(alice, bob, [True, True, False], active_seconds=1200)
    TimeCorrection.objects.create(user=bob, day=timezone.localdate(), seconds=1800, reason="missed", by=alice)
    seen = timezone.now() - timedelta(minutes=30)
    Assignment.objects.filter(pk=tasks[0].pk).update(last_seen_at=seen)

    response = signed_in(alice).get(reverse("console:team"))
    assert response.status_code == 200
    page = response.content.decode()
    workers = page[page.index('id="workers-heading"') : page.index('id="researchers-heading"')]
    bob_row = workers[workers.index(">bob<") : workers.index(">dana<")]
    assert 'WebGPT comparison: <span class="qualification-qualified">qualified</span>' in bob_row
    assert 'qualification-paused">paused' in bob_row
    assert bob_row.count("qualification-applicant") == len(kinds_for(Role.LABELER)) - 2
    assert "67% of 3 gold items (95% interval 21%-94%)" in bob_row
    assert ">1.5<" in bob_row  # 3 x 1200 s + 1800 s corrected = 1.5 h
    assert timezone.localtime(seen).strftime("%Y-%m-%d %H:%M") in bob_row
    dana_row = workers[workers.index(">dana<") :]
    assert 'Demonstrations: <span class="qualification-revoked">revoked' in dana_row
    assert "never" in dana_row  # no activity
    researchers = page[page.index('id="researchers-heading"') :]
    assert ">alice<" in researchers and ">root<" in researchers and ">alice<" not in workers
    assert ">charlie<" in page[page.index('id="none-heading"') :]


def test_last_activity_is_the_latest_of_submissions_task_visits_and_episode_visits(team):
    alice, bob, dana = team["alice"], team["bob"], team["dana"]
    tasks = gold_judgements(alice, bob, [True, False])
    now = timezone.now()
    Assignment.objects.filter(pk=tasks[0].pk).update(submitted_at=now - timedelta(hours=5), last_seen_at=None)
    Assignment.objects.filter(pk=tasks[1].pk).update(
        submitted_at=now - timedelta(hours=4), last_seen_at=now - timedelta(hours=3)
    )
    question = tasks[0].item.question
    Episode.objects.create(
        kind=EpisodeKind.HUMAN,
        user=dana,
        question=question,
        status=EpisodeStatus.BROWSING,
        settings={},
        state={},
        last_seen_at=now - timedelta(hours=1),
    )
    Episode.objects.create(
        kind=EpisodeKind.HUMAN,
        user=dana,
        question=question,
        status=EpisodeStatus.FINISHED,
        settings={},
        state={},
        last_seen_at=None,
    )
    latest = last_activity([bob.pk, dana.pk, alice.pk])
    assert latest == {bob.pk: now - timedelta(hours=3), dana.pk: now - timedelta(hours=1)}


def test_the_team_page_and_api_are_for_researchers(team):
    for name in ("bob", "dana", "charlie"):
        assert signed_in(team[name]).get(reverse("console:team")).status_code == 403
        assert api(team[name]).get("/api/team").status_code == 403
        assert api(team[name]).post(f"/api/team/{team['bob'].pk}/state", {}, format="json").status_code == 403
    assert api(None).get("/api/team").status_code == 401


# Actions on one person ----------------------------------------------------------------------------------


def post_state(client, person, action: str, reason: str = "a reason", kind: str = COMPARISON, **extra):
    data = {"kind": kind, "action": action, "reason": reason, **extra}
    return client.post(reverse("console:team_state", args=[person.pk]), data)


@pytest.mark.parametrize(
    ("before", "action", "after"),
    [
        ([], "qualify", State.QUALIFIED),
        ([State.QUALIFIED], "pause", State.PAUSED),
        ([State.QUALIFIED, State.PAUSED], "reinstate", State.QUALIFIED),
        ([State.QUALIFIED], "revoke", State.REVOKED),
        ([State.REVOKED], "reset", State.APPLICANT),
        ([State.REVOKED], "qualify", State.QUALIFIED),
    ],
)
def test_each_action_changes_the_state_and_records_who_when_and_why(team, before, action, after):
    alice, bob = team["alice"], team["bob"]
    for state in before:
        set_state(bob, COMPARISON, state, by=None, reason="setup")
    events = QualificationEvent.objects.count()
    response = post_state(signed_in(alice), bob, action, reason="  checked their last 20 items  ")
    assert response.status_code == 302 and response.url == reverse("console:team_person", args=[bob.pk])
    assert state_of(bob, COMPARISON) == after
    assert QualificationEvent.objects.count() == events + 1
    event = QualificationEvent.objects.first()
    assert (event.user, event.kind, event.from_state, event.to_state) == (
        bob,
        COMPARISON,
        before[-1] if before else State.APPLICANT,
        after,
    )
    assert (event.by, event.reason) == (alice, "checked their last 20 items")
    assert AuditEntry.objects.filter(action="qualification.change", actor=alice).exists()
    assert Qualification.objects.get(user=bob, kind=COMPARISON).work_excluded_before is None


def test_a_revocation_can_leave_their_work_until_now_out_of_exports(team):
    alice, bob = team["alice"], team["bob"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=None, reason="setup")
    before = timezone.now()
    response = post_state(signed_in(alice), bob, "revoke", reason="careless", exclude_work="on")
    assert response.status_code == 302
    row = Qualification.objects.get(user=bob, kind=COMPARISON)
    assert row.state == State.REVOKED and before <= row.work_excluded_before <= timezone.now()


@pytest.mark.parametrize(
    ("start", "data", "words"),
    [
        (State.QUALIFIED, {"action": "qualify"}, "cannot become qualified"),
        (State.APPLICANT, {"action": "pause"}, "cannot become paused"),
        (State.QUALIFIED, {"action": "pause", "reason": "   "}, "Say why"),
        (State.QUALIFIED, {"action": "pause", "exclude_work": "on"}, "only with a revocation"),
        (State.QUALIFIED, {"action": "promote"}, "Select a valid choice"),
        (State.QUALIFIED, {"action": "pause", "kind": "rating:nope"}, "Select a valid choice"),
    ],
)
def test_a_refused_change_says_why_and_changes_nothing(team, start, data, words):
    alice, bob = team["alice"], team["bob"]
    if start != State.APPLICANT:
        set_state(bob, COMPARISON, start, by=None, reason="setup")
    events, audit = QualificationEvent.objects.count(), AuditEntry.objects.count()
    response = post_state(signed_in(alice), bob, **{"reason": "a reason", **data})
    assert response.status_code == 400
    assert words in response.content.decode() and "Nothing was changed." in response.content.decode()
    assert state_of(bob, COMPARISON) == start
    assert (QualificationEvent.objects.count(), AuditEntry.objects.count()) == (events, audit)


def test_the_buttons_offered_are_changes_the_state_allows():
    for state, actions in BUTTONS.items():
        for action in actions:
            assert ACTION_STATES[action] in ALLOWED[State(state)], (state, action)


def test_the_person_page_shows_the_audit_trail_and_only_the_allowed_buttons(team):
    alice, bob = team["alice"], team["bob"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=alice, reason="passed the screening test")
    figures = {"accuracy": 0.5, "count": 10}
    set_state(bob, COMPARISON, State.PAUSED, by=None, reason="gold accuracy 50%", figures=figures)
    page = signed_in(alice).get(reverse("console:team_person", args=[bob.pk])).content.decode()
    trail = page[page.index('id="audit-heading"') :]
    rows = re.findall(r"<tr>(.*?)</tr>", trail, re.S)
    cells = [found for row in rows if (found := re.findall(r"<td>(.*?)</td>", row, re.S))]
    assert [row[1:6] for row in cells] == [
        ["WebGPT comparison", "qualified", "paused", "automatic", "gold accuracy 50%"],
        ["WebGPT comparison", "applicant", "qualified", "alice", "passed the screening test"],
    ]
    assert cells[0][6] == "accuracy: 0.5; count: 10"
    work = page[page.index('id="work-heading"') : page.index('id="roles-heading"')]
    comparison = work[work.index('<th scope="row">WebGPT comparison') :].split("</tr>")[0]
    assert re.findall(r'name="action" value="(\w+)"', comparison) == ["reinstate", "revoke"]


def test_qualify_for_all_kinds_of_a_role_needs_a_reason_and_leaves_qualified_kinds_alone(team):
    alice, bob = team["alice"], team["bob"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=None, reason="setup")
    url = reverse("console:team_qualify_role", args=[bob.pk])
    events = QualificationEvent.objects.count()
    response = signed_in(alice).post(url, {"role": "labeler", "reason": " "})
    assert response.status_code == 400 and QualificationEvent.objects.count() == events
    response = signed_in(alice).post(url, {"role": "labeler", "reason": "worked with us for years"})
    assert response.status_code == 302
    kinds = kinds_for(Role.LABELER)
    assert {kind: state_of(bob, kind) for kind in kinds} == dict.fromkeys(kinds, State.QUALIFIED)
    assert QualificationEvent.objects.count() == events + len(kinds) - 1
    assert signed_in(alice).post(url, {"role": "researcher", "reason": "x"}).status_code == 400


# Roles ------------------------------------------------------------------------------------------------


def post_role(client, person, role: str, action: str):
    return client.post(reverse("console:team_roles", args=[person.pk]), {"role": role, "action": action})


def test_a_researcher_grants_and_removes_labeler_and_demonstrator(team):
    alice, bob, charlie = team["alice"], team["bob"], team["charlie"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=None, reason="setup")
    assert post_role(signed_in(alice), charlie, "demonstrator", "grant").status_code == 302
    assert list(charlie.groups.values_list("name", flat=True)) == ["demonstrator"]
    assert state_of(charlie, "demonstration") == State.APPLICANT  # a new role starts with its screening
    assert post_role(signed_in(alice), bob, "labeler", "remove").status_code == 302
    assert not bob.groups.exists()
    assert state_of(bob, COMPARISON) == State.QUALIFIED  # the states stay
    entries = AuditEntry.objects.filter(action__in=["team.grant_role", "team.remove_role"], actor=alice)
    assert sorted((e.action, e.object_id, e.data["role"]) for e in entries) == [
        ("team.grant_role", str(charlie.pk), "demonstrator"),
        ("team.remove_role", str(bob.pk), "labeler"),
    ]
    page = signed_in(alice).get(reverse("console:team_person", args=[bob.pk])).content.decode()
    assert "team.remove_role labeler · alice" in page


def test_only_a_superuser_grants_or_removes_the_researcher_role(team):
    alice, bob, root = team["alice"], team["bob"], team["root"]
    response = post_role(signed_in(alice), bob, "researcher", "grant")
    assert response.status_code == 403 and "Only a superuser" in response.content.decode()
    assert list(bob.groups.values_list("name", flat=True)) == ["labeler"]
    assert post_role(signed_in(alice), alice, "researcher", "remove").status_code == 403
    assert alice.groups.filter(name="researcher").exists()
    assert post_role(signed_in(root), bob, "researcher", "grant").status_code == 302
    assert bob.groups.filter(name="researcher").exists()
    # Nor through an invitation or a new account.
    count = User.objects.count()
    add = {"add-username": "eve", "add-roles": ["researcher"], "add-days": "7"}
    assert signed_in(alice).post(reverse("console:team_add"), add).status_code == 400
    invite = {"invite-roles": ["researcher"], "invite-days": "7"}
    assert signed_in(alice).post(reverse("console:team_invite"), invite).status_code == 400
    assert (User.objects.count(), Invitation.objects.count()) == (count, 0)
    page = signed_in(alice).get(reverse("console:team")).content.decode()
    assert 'value="researcher"' not in page  # not offered to alice
    assert 'value="researcher"' in signed_in(root).get(reverse("console:team")).content.decode()


# Invitations ------------------------------------------------------------------------------------------


def link_on(response) -> str:
    assert response.status_code == 200, response.content[:300]
    url = re.search(r'id="invite-url" class="link-box" value="([^"]+)"', response.content.decode())[1]
    return url.removeprefix("http://testserver")


def test_an_added_person_sets_a_password_with_the_link_once(team, client):
    alice = team["alice"]
    data = {"add-username": "erin", "add-email": "erin@example.org", "add-roles": ["labeler"]}
    data["add-days"] = "7"
    link = link_on(signed_in(alice).post(reverse("console:team_add"), data))
    erin = User.objects.get(username="erin")
    assert not erin.has_usable_password() and erin.email == "erin@example.org"
    assert list(erin.groups.values_list("name", flat=True)) == ["labeler"]
    assert state_of(erin, COMPARISON) == State.APPLICANT
    token = link.rstrip("/").rsplit("/", 1)[1]
    assert len(token) == 43  # 32 bytes, urlsafe base64
    invitation = Invitation.objects.get()
    assert invitation.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert invitation.accepted_by == erin and invitation.roles == []
    assert token not in json.dumps(list(AuditEntry.objects.values("data")))

    page = client.get(link)
    assert page.status_code == 200 and "erin" in page.content.decode()
    assert 'name="username"' not in page.content.decode()  # the account's name is set
    response = client.post(link, {"password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302 and response.url == reverse("home")
    erin.refresh_from_db()
    assert erin.check_password(PASSWORD)
    assert int(client.session["_auth_user_id"]) == erin.pk
    invitation.refresh_from_db()
    assert invitation.accepted_at is not None
    assert client.get(link).status_code == 410


def test_an_invitation_link_makes_an_account_with_its_roles(team, client):
    alice = team["alice"]
    data = {"invite-roles": ["labeler", "demonstrator"], "invite-note": "Frank from the agency"}
    data["invite-days"] = "3"
    before = timezone.now()
    link = link_on(signed_in(alice).post(reverse("console:team_invite"), data))
    invitation = Invitation.objects.get()
    assert invitation.roles == ["labeler", "demonstrator"] and invitation.note == "Frank from the agency"
    assert before + timedelta(days=3) <= invitation.expires_at <= timezone.now() + timedelta(days=3)
    assert "Frank from the agency" in signed_in(alice).get(reverse("console:team")).content.decode()

    count = User.objects.count()
    for body, field in (
        ({"username": "frank", "password1": "password", "password2": "password"}, "too common"),
        ({"username": "frank", "password1": PASSWORD, "password2": PASSWORD + "x"}, "differ"),
        ({"username": "BOB", "password1": PASSWORD, "password2": PASSWORD}, "taken"),
        ({"username": "fr ank", "password1": PASSWORD, "password2": PASSWORD}, "valid username"),
    ):
        response = client.post(link, body)
        assert response.status_code == 400 and field in response.content.decode(), field
    assert User.objects.count() == count and Invitation.objects.get().accepted_at is None

    response = client.post(link, {"username": "frank", "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302
    frank = User.objects.get(username="frank")
    assert sorted(frank.groups.values_list("name", flat=True)) == ["demonstrator", "labeler"]
    assert frank.check_password(PASSWORD) and int(client.session["_auth_user_id"]) == frank.pk
    assert state_of(frank, COMPARISON) == State.APPLICANT  # they meet the screening tests first
    used = client.post(link, {"username": "frank2", "password1": PASSWORD, "password2": PASSWORD})
    assert used.status_code == 410 and not User.objects.filter(username="frank2").exists()


def test_expired_used_and_unknown_links_get_the_same_page(team, client):
    alice = team["alice"]
    expired = invitations.invite(alice, [Role.LABELER])
    past = timezone.now() - timedelta(seconds=1)
    Invitation.objects.filter(pk=expired.invitation.pk).update(expires_at=past)
    used = invitations.invite(alice, [Role.LABELER])
    invitations.accept(used.invitation.pk, "gina", PASSWORD)
    pages = []
    for token in (expired.token, used.token, "x" * 43, "nope", "A" * 500):
        url = reverse("account:invite", args=[token])
        response = client.get(url)
        assert response.status_code == 410
        post = client.post(url, {"username": "henry", "password1": PASSWORD, "password2": PASSWORD})
        assert post.status_code == 410
        pages.append(re.sub(r'"X-CSRFToken": "[^"]*"', "", response.content.decode()))  # a token each
    assert len(set(pages)) == 1 and "expired or was used" in pages[0]
    assert not User.objects.filter(username="henry").exists()


def test_a_link_for_an_account_whose_account_was_deleted_opens_nothing(team, client):
    user, link = invitations.add_person(team["alice"], "ivan", "", [Role.LABELER])
    user.delete()
    assert client.get(reverse("account:invite", args=[link.token])).status_code == 410


def test_a_new_link_for_an_account_ends_the_earlier_one(team, client):
    alice = team["alice"]
    _, first = invitations.add_person(alice, "jo", "", [Role.DEMONSTRATOR])
    jo = User.objects.get(username="jo")
    second = link_on(signed_in(alice).post(reverse("console:team_link", args=[jo.pk])))
    assert client.get(reverse("account:invite", args=[first.token])).status_code == 410
    assert client.get(second).status_code == 200
    # An account with a password gets no link.
    response = signed_in(alice).post(reverse("console:team_link", args=[team["bob"].pk]))
    assert response.status_code == 400 and "has a password already" in response.content.decode()


def test_a_researcher_withdraws_a_pending_invitation_and_its_link_stops_working(team, client):
    alice = team["alice"]
    link = invitations.invite(alice, [Role.LABELER], "Frank from the agency")
    url = reverse("account:invite", args=[link.token])
    assert client.get(url).status_code == 200
    withdraw = reverse("console:team_withdraw_invitation", args=[link.invitation.pk])
    page = signed_in(alice).get(reverse("console:team")).content.decode()
    assert withdraw in page and "Withdraw the link for Frank from the agency" in page

    response = signed_in(alice).post(withdraw)
    assert response.status_code == 302 and response.url == reverse("console:team")
    assert client.get(url).status_code == 410
    post = client.post(url, {"username": "frank", "password1": PASSWORD, "password2": PASSWORD})
    assert post.status_code == 410 and not User.objects.filter(username="frank").exists()
    assert withdraw not in signed_in(alice).get(reverse("console:team")).content.decode()
    entry = AuditEntry.objects.get(action="team.withdraw_invitation")
    assert entry.actor == alice and entry.object_id == str(link.invitation.pk)
    assert entry.data["note"] == "Frank from the agency" and entry.data["roles"] == ["labeler"]
    # Withdrawn, used or expired: nothing pending to withdraw.
    assert signed_in(alice).post(withdraw).status_code == 404
    used = invitations.invite(alice, [Role.LABELER])
    invitations.accept(used.invitation.pk, "gina", PASSWORD)
    used_url = reverse("console:team_withdraw_invitation", args=[used.invitation.pk])
    assert signed_in(alice).post(used_url).status_code == 404
    assert AuditEntry.objects.filter(action="team.withdraw_invitation").count() == 1


def test_an_outsider_cannot_withdraw_an_invitation(team, client):
    link = invitations.invite(team["alice"], [Role.LABELER])
    withdraw = reverse("console:team_withdraw_invitation", args=[link.invitation.pk])
    api_url = reverse("api-team-invitation", args=[link.invitation.pk])
    for outsider in ("bob", "dana", "charlie"):
        assert signed_in(team[outsider]).post(withdraw).status_code == 404
        assert api(team[outsider]).delete(api_url).status_code == 404
    assert client.post(withdraw).status_code == 302  # to the sign-in page
    assert api(None).delete(api_url).status_code == 401
    assert client.get(reverse("account:invite", args=[link.token])).status_code == 200
    assert not AuditEntry.objects.filter(action="team.withdraw_invitation").exists()


def test_the_api_withdraws_an_accounts_link_and_the_account_may_get_a_new_one(team, client):
    alice = team["alice"]
    jo, link = invitations.add_person(alice, "jo", "", [Role.DEMONSTRATOR])
    url = reverse("api-team-invitation", args=[link.invitation.pk])
    response = api(alice).delete(url)
    assert response.status_code == 204
    assert client.get(reverse("account:invite", args=[link.token])).status_code == 410
    assert AuditEntry.objects.get(action="team.withdraw_invitation").data["account"] == "jo"
    assert api(alice).delete(url).status_code == 404
    assert api(alice).delete(reverse("api-team-invitation", args=[10**6])).status_code == 404
    again = link_on(signed_in(alice).post(reverse("console:team_link", args=[jo.pk])))
    assert client.get(again).status_code == 200


@pytest.mark.parametrize(
    "data",
    [
        {"invite-roles": [], "invite-days": "7"},
        {"invite-roles": ["labeler"], "invite-days": "0"},
        {"invite-roles": ["labeler"], "invite-days": "31"},
        {"invite-roles": ["boss"], "invite-days": "7"},
    ],
)
def test_a_bad_invitation_request_makes_nothing(team, data):
    response = signed_in(team["alice"]).post(reverse("console:team_invite"), data)
    assert response.status_code == 400 and not Invitation.objects.exists()


def test_adding_a_taken_username_makes_nothing(team):
    data = {"add-username": "Bob", "add-roles": ["labeler"], "add-days": "7"}
    response = signed_in(team["alice"]).post(reverse("console:team_add"), data)
    assert response.status_code == 400 and "is taken" in response.content.decode()
    assert not Invitation.objects.exists() and User.objects.filter(username__iexact="bob").count() == 1


# The API ----------------------------------------------------------------------------------------------


def test_the_team_api_lists_people_with_their_figures(team):
    alice, bob = team["alice"], team["bob"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=alice, reason="passed")
    gold_judgements(alice, bob, [True, False, True, True], active_seconds=900)
    body = api(alice).get("/api/team").json()
    people = {row["username"]: row for row in body["people"]}
    assert sorted(people) == ["bob", "dana"]
    assert sorted(row["username"] for row in body["researchers"]) == ["alice", "root"]
    assert [row["username"] for row in body["without_role"]] == ["charlie"]
    bob_row = people["bob"]
    assert bob_row["roles"] == ["labeler"]
    assert bob_row["states"][COMPARISON] == "qualified" and bob_row["states"]["ranking"] == "applicant"
    assert set(bob_row["states"]) == set(kinds_for(Role.LABELER))
    # 3 of 4: Wilson 95% interval by hand: 0.3006 to 0.9544.
    gold = bob_row["gold"]
    assert (gold["accuracy"], gold["count"]) == (0.75, 4)
    assert gold["low"] == pytest.approx(0.3006, abs=1e-4) and gold["high"] == pytest.approx(0.9544, abs=1e-4)
    assert (bob_row["seconds_this_week"], bob_row["hours_this_week"]) == (3600.0, 1.0)
    assert people["dana"]["states"] == {"demonstration": "applicant"}
    assert people["dana"]["gold"] == {"accuracy": None, "count": 0, "low": 0.0, "high": 1.0}


def test_the_state_api_changes_a_state_with_its_reason(team):
    alice, bob = team["alice"], team["bob"]
    url = f"/api/team/{bob.pk}/state"
    body = {"kind": COMPARISON, "action": "qualify", "reason": "passed"}
    response = api(alice).post(url, body, format="json")
    assert response.status_code == 200
    assert response.json()["state"] == "qualified" and response.json()["decided_by"] == "alice"
    body = {"kind": COMPARISON, "action": "revoke", "reason": "careless", "exclude_work": True}
    response = api(alice).post(url, body, format="json")
    assert response.status_code == 200 and response.json()["work_excluded_before"] is not None
    event = QualificationEvent.objects.first()
    assert (event.from_state, event.to_state, event.by) == ("qualified", "revoked", alice)
    assert event.reason == "careless"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "nope", "action": "pause", "reason": "x"}, "kind"),
        ({"kind": COMPARISON, "action": "pause", "reason": "  "}, "reason"),
        ({"kind": COMPARISON, "action": "promote", "reason": "x"}, "action"),
        ({"kind": COMPARISON, "action": "qualify", "reason": "x"}, "action"),  # qualified already
        ({"kind": COMPARISON, "action": "pause", "reason": "x", "exclude_work": True}, "exclude_work"),
        ({"kind": COMPARISON, "action": "pause", "reason": "x", "why": "x"}, "why"),
    ],
)
def test_the_state_api_names_the_field_of_a_refusal_and_changes_nothing(team, body, field):
    alice, bob = team["alice"], team["bob"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=None, reason="setup")
    events = QualificationEvent.objects.count()
    response = api(alice).post(f"/api/team/{bob.pk}/state", body, format="json")
    assert response.status_code == 400 and list(response.json()) == [field]
    assert QualificationEvent.objects.count() == events and state_of(bob, COMPARISON) == State.QUALIFIED


def test_the_state_api_on_nobody_is_a_404(team):
    body = {"kind": COMPARISON, "action": "qualify", "reason": "x"}
    assert api(team["alice"]).post("/api/team/999999/state", body, format="json").status_code == 404


# manage.py qualify ----------------------------------------------------------------------------------------


def test_the_qualify_command_sets_one_kind_or_every_kind_of_their_roles(team):
    bob = team["bob"]
    call_command("qualify", "bob", "--kind", "ranking", "--reason", "passed on paper", verbosity=0)
    assert state_of(bob, "ranking") == State.QUALIFIED
    event = QualificationEvent.objects.first()
    assert (event.by, event.reason, event.figures) == (None, "passed on paper", {"via": "command line"})
    call_command("qualify", "bob", "--all", "--reason", "known to us", "--by", "alice", verbosity=0)
    kinds = kinds_for(Role.LABELER)
    assert {kind: state_of(bob, kind) for kind in kinds} == dict.fromkeys(kinds, State.QUALIFIED)
    assert QualificationEvent.objects.filter(user=bob).count() == len(kinds)  # ranking was left alone
    assert QualificationEvent.objects.first().by == team["alice"]
    call_command("qualify", "bob", "--kind", COMPARISON, "--state", "paused", "--reason", "odd", verbosity=0)
    assert state_of(bob, COMPARISON) == State.PAUSED


def test_the_qualify_command_changes_all_or_nothing(team):
    bob = team["bob"]
    set_state(bob, COMPARISON, State.QUALIFIED, by=None, reason="setup")
    events = QualificationEvent.objects.count()
    # Pausing every kind: the qualified one could be, the applicant ones cannot.
    with pytest.raises(CommandError, match=r"cannot become paused\. Nothing was changed"):
        call_command("qualify", "bob", "--all", "--state", "paused", "--reason", "x", verbosity=0)
    assert QualificationEvent.objects.count() == events and state_of(bob, COMPARISON) == State.QUALIFIED
    with pytest.raises(CommandError, match="no user"):
        call_command("qualify", "nobody", "--all", "--reason", "x", verbosity=0)
    with pytest.raises(CommandError, match="neither"):
        call_command("qualify", "charlie", "--all", "--reason", "x", verbosity=0)
    with pytest.raises(CommandError):
        call_command("qualify", "bob", "--kind", "nope", "--reason", "x", verbosity=0)


def test_the_workforce_page_links_the_team_page_for_researchers(team):
    assert (
        reverse("console:team") in signed_in(team["alice"]).get(reverse("console:workforce")).content.decode()
    )
    page = signed_in(team["bob"]).get(reverse("annotation:next_task")).content.decode()
    assert reverse("console:team") not in page


def test_the_team_page_shows_agreement_with_the_others_with_its_interval(django_user_model, alice, client):
    from tests.test_workforce_gate import comparison_batch, judge

    comparison_batch("shared", 2, overlap=2)
    first, second = (make_user(django_user_model, name, "labeler") for name in ("first", "second"))
    for _ in range(2):
        judge(first, True)
        judge(second, True)  # the same answer preferred on both shared items: 2 of 2
    client.force_login(alice)
    page = client.get(reverse("console:team")).content.decode()
    # Wilson for 2 of 2: (1 + z²/4)/(1 + z²/2) ± ...: low 34%, high 100%.
    assert "100% of 2 shared items (95% interval 34%-100%)" in page
    body = client.get(reverse("api-team")).json()
    row = next(person for person in body["people"] if person["username"] == "first")
    assert row["agreement"]["count"] == 2 and row["agreement"]["value"] == 1.0


# The person page's navigation and the screening result beside the decision -------------------------------


def test_the_person_page_shows_the_navigation(team):
    page = (
        signed_in(team["alice"]).get(reverse("console:team_person", args=[team["bob"].pk])).content.decode()
    )
    nav = page[page.index('<nav aria-label="Main">') : page.index("</nav>")]
    assert reverse("console:workforce") in nav and reverse("console:exports") in nav


def test_the_team_list_and_the_person_page_show_a_failed_screening_before_qualifying(team):
    from tests.test_workforce_gate import KIND, comparison_batch, judge, set_reference

    alice, bob = team["alice"], team["bob"]
    screening = comparison_batch("screen", 6, is_screening=True)
    set_reference(screening, alice, [True] * 6)
    for agrees in [True] + [False] * 5:  # 1 of 6: 17%, under the 75% cutoff
        judge(bob, agrees)
    shown = "screening: <strong>fail</strong>, 6 of 6 items; Agreement with the reference preference 17% ["
    team_page = signed_in(alice).get(reverse("console:team")).content.decode()
    bob_row = team_page[team_page.index(">bob<") : team_page.index(">dana<")]
    assert shown in bob_row and "cutoff 75%" in bob_row
    person = signed_in(alice).get(reverse("console:team_person", args=[bob.pk])).content.decode()
    row = person[person.index(f"{kind_label(KIND)}</th>") :].split("</tr>")[0]
    assert shown in row and "Screening (6 of 6 items)" in row  # the reason offered names the scores
    body = api(alice).get("/api/team").json()
    screened = next(one for one in body["people"] if one["username"] == "bob")["screening"]
    assert list(screened) == [KIND] and screened[KIND]["suggestion"] == "fail"
    assert screened[KIND]["scores"][0]["value"] == pytest.approx(1 / 6)


def test_screening_results_cost_the_same_queries_whatever_the_number_of_candidates(team, django_user_model):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.test_workforce_gate import comparison_batch, judge, set_reference

    set_reference(comparison_batch("screen", 1, is_screening=True), team["alice"], [True])
    counts = []
    for name in ("first", "second", "third"):
        judge(make_user(django_user_model, name, "labeler", applicant=True), True)
        with CaptureQueriesContext(connection) as queries:
            assert len(screening_results()) == len(counts) + 1
        counts.append(len(queries))
    assert len(set(counts)) == 1
