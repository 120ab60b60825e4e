"""The idle timeout counts what a person does: pages that poll a job or the queues do not keep an untouched
tab signed in, and a poll after the session ended takes the whole page to the sign-in form."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.contrib.sessions.models import Session
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from core.sessions import IdleSessionMiddleware

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
POLL = {"HTTP_HX_REQUEST": "true", "HTTP_X_POLL": "1"}


@pytest.fixture
def admin_client_signed_in(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="root-pw-long"))
    return client


def expiry(client) -> timezone.datetime:
    return Session.objects.get(session_key=client.session.session_key).expire_date


def test_a_poll_leaves_the_session_to_expire_where_the_last_real_request_put_it(admin_client_signed_in):
    client = admin_client_signed_in
    queues = reverse("console:queues")
    assert client.get(queues).status_code == 200
    before = expiry(client)

    polled = client.get(queues, **POLL)
    assert polled.status_code == 200 and 'id="queues"' in polled.content.decode()
    assert settings.SESSION_COOKIE_NAME not in polled.cookies  # no renewed cookie either
    assert expiry(client) == before

    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        assert client.get(queues).status_code == 200  # the person clicks: that renews it
    assert expiry(client) > before


def test_the_expiry_moves_at_most_once_a_minute_and_a_change_is_always_saved(admin_client_signed_in):
    """Renewing on every request wrote the session row for each draft and heartbeat; once a minute moves an
    hours-long timeout just as well. A request that changes the session is saved whenever it comes."""
    client = admin_client_signed_in
    queues = reverse("console:queues")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        assert client.get(queues).status_code == 200
        renewed = expiry(client)
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        assert client.get(queues).status_code == 200
        assert expiry(client) == renewed  # not written again within the minute
        # A request that changes the session (here a view that notes something) is saved all the same.
        key = client.session.session_key
        request = RequestFactory().get(queues, HTTP_COOKIE=f"{settings.SESSION_COOKIE_NAME}={key}")
        request.COOKIES[settings.SESSION_COOKIE_NAME] = key

        def view(request):
            request.session["note"] = "kept"
            return HttpResponse()

        IdleSessionMiddleware(view)(request)
        assert Session.objects.get(session_key=key).get_decoded()["note"] == "kept"
    with time_machine.travel(start + timedelta(seconds=90), tick=False):
        assert client.get(queues).status_code == 200
        assert expiry(client) == renewed + timedelta(seconds=90)


def test_a_poll_after_the_session_ended_sends_the_whole_page_to_sign_in(admin_client_signed_in):
    client = admin_client_signed_in
    Session.objects.filter(session_key=client.session.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    page = "http://testserver" + reverse("console:queues") + "?tab=1"
    polled = client.get(reverse("console:queues"), HTTP_HX_CURRENT_URL=page, **POLL)
    assert polled.status_code == 200 and polled.content == b""
    assert polled["HX-Redirect"] == reverse("login") + "?next=/console/queues/%3Ftab%3D1"


def test_every_element_that_polls_says_so():
    """A template that re-fetches itself on a timer without ``X-Poll`` would keep idle sessions alive."""
    polling = re.compile(r"<[^>]*hx-trigger=\"[^\"]*(every |load delay)[^>]*>", re.S)
    found = {
        f"{path.relative_to(TEMPLATES)}: {tag[:80]}": "X-Poll" in tag
        for path in TEMPLATES.rglob("*.html")
        for tag in (m.group(0) for m in polling.finditer(path.read_text()))
    }
    assert len(found) >= 7
    assert all(found.values()), [where for where, ok in found.items() if not ok]
