"""Escaping, CSRF and the Content-Security-Policy."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation.questions.service import import_questions
from core.api_tokens import issue

pytestmark = pytest.mark.django_db


def test_every_page_has_a_strict_content_security_policy(client_for, alice):
    response = client_for(alice).get(reverse("console:home"))
    policy = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe" not in policy
    assert response.headers["X-Frame-Options"] == "DENY"


def test_pages_load_no_inline_script_and_htmx_from_our_own_static_files(client_for, alice):
    html = client_for(alice).get(reverse("console:home")).content.decode()
    assert '<script src="/static/vendor/htmx-2.0.11.min.js"' in html
    assert "<script>" not in html
    assert "style=" not in html


def test_question_text_is_escaped(client_for, alice):
    report = import_questions(
        b'{"question": "<script>alert(1)</script> is this safe?"}\n', filename="x.jsonl"
    )
    question = report.questions.get()
    html = client_for(alice).get(reverse("questions:detail", args=[question.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_state_changes_need_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("console:check_workers")).status_code == 403
    assert client.post(reverse("questions:import"), {}).status_code == 403


def test_the_api_schema_needs_a_signed_in_user(client_for, charlie):
    anonymous = client_for(None).get(reverse("api-schema"))
    assert anonymous.status_code == 401
    assert b"/api/tasks/next" not in anonymous.content
    assert client_for(charlie).get(reverse("api-schema")).status_code == 200
    by_token = Client().get(reverse("api-schema"), HTTP_AUTHORIZATION=f"Token {issue(charlie)}")
    assert by_token.status_code == 200 and b"/api/tasks/next" in by_token.content


def test_every_response_switches_off_browser_features_it_does_not_use(client_for, alice):
    for client, url in ((Client(), reverse("login")), (client_for(alice), reverse("api-docs"))):
        policy = client.get(url).headers["Permissions-Policy"]
        assert "camera=()" in policy and "geolocation=()" in policy and "microphone=()" in policy
    assert "Permissions-Policy" in client_for(alice).get("/api/questions").headers


def test_pages_link_a_favicon_that_exists_and_favicon_ico_leads_to_it(client_for, alice):
    from django.contrib.staticfiles import finders

    html = client_for(alice).get(reverse("console:home")).content.decode()
    assert '<link rel="icon" href="/static/favicon.svg"' in html
    assert finders.find("favicon.svg")
    response = Client().get("/favicon.ico")
    assert response.status_code == 302 and response.url == "/static/favicon.svg"


def test_a_session_ends_after_the_idle_time_and_each_request_renews_it(client_for, alice, settings):
    from datetime import timedelta

    from django.contrib.sessions.models import Session
    from django.utils import timezone

    client = client_for(alice)
    session = Session.objects.get()
    Session.objects.filter(pk=session.pk).update(expire_date=timezone.now() + timedelta(minutes=1))
    response = client.get(reverse("console:home"))
    assert response.cookies["sessionid"]["max-age"] == settings.SESSION_COOKIE_AGE
    renewed = Session.objects.get(pk=session.pk).expire_date - timezone.now()
    assert renewed > timedelta(seconds=settings.SESSION_COOKIE_AGE - 60)
    Session.objects.filter(pk=session.pk).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert client.get(reverse("console:home")).status_code == 302  # idle too long: sign in again


def test_template_comments_never_reach_the_page():
    """Django's ``{# ... #}`` ends on its own line: one spread over two lines is printed on every page."""
    from tests.conftest import ROOT

    unclosed = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "templates").rglob("*.html")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if line.count("{#") != line.count("#}")
    ]
    assert unclosed == []


def test_pages_show_no_template_syntax(client_for, alice):
    html = client_for(alice).get(reverse("console:home")).content.decode()
    assert "{#" not in html and "{%" not in html
