"""Brute force and floods: sign-in lockout per username and, with its own larger limit, per address
(django-axes) on both sign-in forms, a clear page when locked out, unlocking by command; API throttles per
user and per address."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from core.api_tokens import issue

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def sign_in(username: str, password: str, address: str = "10.0.0.1", url: str = LOGIN, **headers):
    return Client().post(url, {"username": username, "password": password}, REMOTE_ADDR=address, **headers)


def fail(times: int, username: str, address: str = "10.0.0.1", url: str = LOGIN) -> list[int]:
    """Status codes of ``times`` wrong passwords: 200 is the form again with its error, 429 the lockout."""
    return [sign_in(username, "wrong", address, url).status_code for _ in range(times)]


def test_five_wrong_passwords_lock_the_account_with_a_clear_page_until_an_admin_unlocks_it(bob, settings):
    settings.AXES_FAILURE_LIMIT = 5
    assert fail(5, "bob") == [200, 200, 200, 200, 429]  # the fifth failure locks
    locked = sign_in("bob", "bob-pw")  # the right password, too late
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed sign-ins" in page and "5 wrong passwords" in page and "15 minutes" in page
    assert "_auth_user_id" not in locked.client.session
    assert sign_in("bob", "bob-pw", address="10.9.9.9").status_code == 429  # per user: any address

    call_command("axes_reset_username", "bob", verbosity=0)
    unlocked = sign_in("bob", "bob-pw")
    assert unlocked.status_code == 302 and unlocked.client.session["_auth_user_id"] == str(bob.pk)


def test_one_address_trying_many_usernames_is_locked_out_and_other_addresses_are_not(bob, settings):
    settings.AXES_FAILURE_LIMIT, settings.LOGIN_FAILURES_PER_ADDRESS = 3, 5
    tries = [fail(1, name, address="10.0.0.66")[0] for name in ("ann", "ben", "cat", "dan", "eve")]
    assert tries == [200, 200, 200, 200, 429]
    assert sign_in("bob", "bob-pw", address="10.0.0.66").status_code == 429
    assert sign_in("bob", "bob-pw", address="10.0.0.7").status_code == 302
    call_command("axes_reset_ip", "10.0.0.66", verbosity=0)
    assert sign_in("bob", "bob-pw", address="10.0.0.66").status_code == 302


def test_a_forged_forwarded_for_header_does_not_dodge_the_address_lockout(bob, settings):
    settings.LOGIN_FAILURES_PER_ADDRESS = 3
    tries = [sign_in(name, "wrong", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}") for n, name in enumerate("abc")]
    assert [response.status_code for response in tries] == [200, 200, 429]
    assert sign_in("bob", "bob-pw", HTTP_X_FORWARDED_FOR="192.0.2.99").status_code == 429


def test_the_admin_sign_in_is_locked_out_too(django_user_model, settings):
    settings.AXES_FAILURE_LIMIT = 3
    django_user_model.objects.create_superuser("root", password="root-pw-long")
    assert fail(3, "root", url="/admin/login/") == [200, 200, 429]
    assert sign_in("root", "root-pw-long", url="/admin/login/").status_code == 429
    assert sign_in("root", "root-pw-long", address="10.0.0.2").status_code == 429  # same account


def test_five_typos_lock_that_username_and_not_the_office_they_came_from(alice, bob, settings):
    """bob and alice label from one office address: bob's five wrong passwords lock bob only."""
    settings.AXES_FAILURE_LIMIT, settings.LOGIN_FAILURES_PER_ADDRESS = 5, 50
    office = "10.0.0.50"
    assert fail(5, "bob", address=office) == [200, 200, 200, 200, 429]
    assert sign_in("bob", "bob-pw", address=office).status_code == 429
    assert sign_in("alice", "alice-pw", address=office).status_code == 302


def test_an_address_is_locked_at_its_own_larger_limit(alice, bob, settings):
    """Typos from an office add up to the address's limit, however they spread over usernames; then the
    address is locked for everyone there, and only there."""
    settings.AXES_FAILURE_LIMIT, settings.LOGIN_FAILURES_PER_ADDRESS = 3, 8
    office = "10.0.0.50"
    tries = [status for name in ("ann", "ben", "cat") for status in fail(2, name, address=office)]
    assert tries == [200] * 6  # six failures: no username at its limit of 3, the address under its 8
    assert sign_in("alice", "alice-pw", address=office).status_code == 302
    assert fail(2, "dan", address=office) == [200, 429]  # the eighth failure locks the address
    assert sign_in("bob", "bob-pw", address=office).status_code == 429
    assert sign_in("bob", "bob-pw", address="10.0.0.7").status_code == 302


def test_a_right_password_clears_the_count(bob, settings):
    settings.AXES_FAILURE_LIMIT = 3
    assert fail(2, "bob") == [200, 200]
    assert sign_in("bob", "bob-pw").status_code == 302
    assert fail(2, "bob") == [200, 200]  # without the reset, the second of these would lock
    assert sign_in("bob", "bob-pw").status_code == 302


def test_signing_in_as_oneself_does_not_clear_the_failures_against_another(bob, django_user_model, settings):
    """Between guesses at root's password, bob signs in as himself from the same address: root's count
    goes on, and the fifth wrong guess locks root (the lockout bypass of the second probe)."""
    settings.AXES_FAILURE_LIMIT = 5
    django_user_model.objects.create_superuser("root", password="root-pw-long")
    assert fail(4, "root") == [200, 200, 200, 200]
    assert sign_in("bob", "bob-pw").status_code == 302
    assert fail(1, "root") == [429]
    assert sign_in("root", "root-pw-long", address="10.0.0.2").status_code == 429


def test_a_right_password_clears_only_its_own_failures_from_its_own_address(bob, settings):
    settings.AXES_FAILURE_LIMIT = 3
    assert fail(2, "bob", address="10.0.0.9") == [200, 200]  # someone elsewhere guessing bob's password
    assert sign_in("bob", "bob-pw").status_code == 302
    assert fail(1, "bob") == [429]  # the guesses from elsewhere still count


@pytest.fixture
def rates(settings):
    def set_rates(user: str) -> None:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": user}}

    return set_rates


def test_the_api_throttles_each_user_on_their_own(rates, alice, bob):
    rates(user="3/minute")
    client = Client(HTTP_AUTHORIZATION=f"Token {issue(alice)}")
    assert [client.get("/api/questions").status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get("/api/questions")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert "throttled" in refused.json()["detail"].lower()
    session = Client()
    session.force_login(alice)
    assert session.get("/api/questions").status_code == 429  # the same person by session: same budget
    other = Client()
    other.force_login(bob)
    assert other.post("/api/tasks/next").status_code == 204  # bob has his own


def test_an_anonymous_caller_is_refused_before_any_throttle_counts(rates):
    rates(user="1/minute")
    assert [Client(REMOTE_ADDR="10.1.1.1").get("/api/questions").status_code for _ in range(3)] == [401] * 3
    assert Client().get(reverse("api-docs")).url.startswith(reverse("login"))  # the docs page: sign in first


def test_behind_a_trusted_proxy_the_lockout_counts_the_address_it_saw(bob, settings):
    settings.LOGIN_FAILURES_PER_ADDRESS = 2
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = "10.0.0.254"
    forwarded = "forged, 198.51.100.1"  # the client wrote the first entry, our proxy the last
    tries = [sign_in(name, "wrong", proxy, HTTP_X_FORWARDED_FOR=forwarded) for name in "ab"]
    assert [response.status_code for response in tries] == [200, 429]
    assert sign_in("bob", "bob-pw", proxy, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 429
    assert sign_in("bob", "bob-pw", proxy, HTTP_X_FORWARDED_FOR="198.51.100.2").status_code == 302
