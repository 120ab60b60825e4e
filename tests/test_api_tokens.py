"""API tokens are kept as invitation links are: a digest stored, the token shown once when it is made
(core/api_tokens.py); replacing one stops the old at once, revoking ends it, tokens from before the
digests keep working."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client
from django.urls import reverse

from core.api_tokens import digest, issue
from core.models import ApiToken, AuditEntry

pytestmark = pytest.mark.django_db


def signs_in(token: str) -> bool:
    """Whether the API takes the token (403 is signed in, without the role the list needs)."""
    return Client().get("/api/questions", HTTP_AUTHORIZATION=f"Token {token}").status_code != 401


@pytest.fixture
def alices_browser(alice) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    return client


def post(client: Client, name: str):
    csrf = client.get(reverse("account:token")).context["csrf_token"]
    return client.post(reverse(name), {"csrfmiddlewaretoken": csrf})


def every_row() -> list[tuple]:
    """Every row of every table in the database, models' or not."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608 (the database's own names)
            rows += cursor.fetchall()
    return rows


def created_by_command(username: str) -> str:
    printed = StringIO()
    call_command("create_api_token", username, stdout=printed)
    return printed.getvalue().strip()


def new_token_on(page) -> str:
    return page.context["new_token"]


def test_alice_sees_her_new_token_once_and_afterwards_only_that_she_has_one(alices_browser):
    assert "You have no token." in alices_browser.get(reverse("account:token")).content.decode()
    made = post(alices_browser, "account:token_rotate")
    token = new_token_on(made)
    assert made.status_code == 200 and token in made.content.decode() and "no-store" in made["Cache-Control"]
    assert signs_in(token)

    later = alices_browser.get(reverse("account:token")).content.decode()
    assert token not in later
    assert f"starting <code>{token[:6]}</code>" in later and "not shown again" in later


def test_the_database_holds_no_token_in_the_clear(alice, alices_browser):
    by_page = new_token_on(post(alices_browser, "account:token_rotate"))
    by_command = created_by_command("alice")
    rows = every_row()  # the audit log's included
    for token in (by_page, by_command):
        assert not [row for row in rows if token in repr(row)]
    assert ApiToken.objects.get(user=alice).digest == digest(by_command)


def test_replacing_alices_token_stops_the_old_one_and_leaves_bobs_alone(alice, bob, alices_browser):
    old, bobs = issue(alice), issue(bob)
    new = new_token_on(post(alices_browser, "account:token_rotate"))
    assert new != old
    assert not signs_in(old) and signs_in(new) and signs_in(bobs)


def test_alice_revokes_her_token_and_it_stops_working(alice, bob, alices_browser):
    token, bobs = issue(alice), issue(bob)
    revoked = post(alices_browser, "account:token_revoke")
    assert revoked.status_code == 302
    assert not signs_in(token) and signs_in(bobs)  # only one's own
    assert "You have no token." in alices_browser.get(reverse("account:token")).content.decode()


def test_changing_a_token_needs_a_post_with_the_csrf_token(alice, alices_browser):
    token = issue(alice)
    assert alices_browser.get(reverse("account:token_rotate")).status_code == 405
    assert alices_browser.post(reverse("account:token_rotate")).status_code == 403
    assert alices_browser.post(reverse("account:token_revoke")).status_code == 403
    assert signs_in(token)


def test_the_audit_log_records_who_changed_whose_token(alice, alices_browser):
    post(alices_browser, "account:token_rotate")
    post(alices_browser, "account:token_revoke")
    created_by_command("alice")
    entries = AuditEntry.objects.order_by("pk").values_list("actor", "action", "object_id", "data")
    assert list(entries) == [
        (alice.pk, "account.rotate_token", str(alice.pk), {}),
        (alice.pk, "account.revoke_token", str(alice.pk), {}),
        (None, "account.rotate_token", str(alice.pk), {}),  # from the command line
    ]


def test_an_administrator_makes_and_revokes_a_token_from_the_command_line(alice):
    first, second = created_by_command("alice"), created_by_command("alice")
    assert not signs_in(first) and signs_in(second)
    call_command("create_api_token", "alice", "--revoke", stderr=StringIO())
    assert not signs_in(second)
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("create_api_token", "nobody")


def test_an_administrator_sees_who_has_a_token_and_revokes_it_without_seeing_it(alice, django_user_model):
    token = issue(alice)
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser("root", password="root-pw-long"))
    listing = admin.get(reverse("admin:core_apitoken_changelist")).content.decode()
    assert token[:6] in listing and token not in listing
    assert admin.get(reverse("admin:core_apitoken_add")).status_code == 403
    row = ApiToken.objects.get(user=alice)
    deleted = admin.post(reverse("admin:core_apitoken_delete", args=[row.pk]), {"post": "yes"})
    assert deleted.status_code == 302 and not signs_in(token)


def test_a_deactivated_account_gets_no_token_and_its_token_stops_working(alice):
    token = issue(alice)
    alice.is_active = False
    alice.save()
    assert not signs_in(token)
    with pytest.raises(CommandError, match="deactivated"):
        call_command("create_api_token", "alice")


@pytest.mark.django_db(transaction=True)
def test_a_plain_token_from_before_the_digests_still_works_and_is_no_longer_stored(alice):
    """A database that used DRF's authtoken: migration 0003 turns its tokens into digests and drops them."""
    executor = MigrationExecutor(connection)
    executor.migrate([("webgpt_site", "0002_role_groups")])
    legacy = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute(
            'CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, "created" timestamp with time zone'
            ' NOT NULL, "user_id" integer NOT NULL)'
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, CURRENT_TIMESTAMP, %s)", [legacy, alice.pk])
    MigrationRecorder(connection).record_applied("authtoken", "0001_initial")

    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert "authtoken_token" not in connection.introspection.table_names()
    assert not MigrationRecorder(connection).migration_qs.filter(app="authtoken").exists()
    assert ApiToken.objects.get(user=alice).prefix == legacy[:6]
    assert signs_in(legacy)
