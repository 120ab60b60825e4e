"""Escaping, CSRF and the Content-Security-Policy."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation.questions.service import import_questions

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
    from rest_framework.authtoken.models import Token

    anonymous = client_for(None).get(reverse("api-schema"))
    assert anonymous.status_code == 401
    assert b"/api/tasks/next" not in anonymous.content
    assert client_for(charlie).get(reverse("api-schema")).status_code == 200
    token = Token.objects.create(user=charlie)
    by_token = Client().get(reverse("api-schema"), HTTP_AUTHORIZATION=f"Token {token.key}")
    assert by_token.status_code == 200 and b"/api/tasks/next" in by_token.content
