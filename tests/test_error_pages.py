"""What a newcomer on ``make run`` (DEBUG) sees when something is missing or not theirs, what the log says
about a refusal, and the way back from the API's docs page."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_a_missing_or_hidden_object_is_the_sites_own_page_also_under_debug(client_for, alice, bob, settings):
    settings.DEBUG = True  # as make run: Django's own page would name the model and the query
    for user, url in (
        (alice, reverse("console:feedback_batch", args=[999])),
        (bob, reverse("annotation:task", args=[999])),
    ):
        page = client_for(user).get(url)
        html = page.content.decode()
        assert page.status_code == 404 and "There is nothing here, or nothing you may see." in html
        assert "DEBUG = True" not in html and "FeedbackBatch" not in html


def test_a_refusal_is_one_log_line_without_a_traceback(client_for, bob, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client_for(bob).get(reverse("console:feedback")).status_code == 403
    (refusal,) = [r for r in caplog.records if r.name == "django.request"]
    assert refusal.getMessage().startswith("Forbidden (Permission denied): /console/feedback/")
    assert refusal.exc_info is None  # Django attached the PermissionDenied's traceback


def test_the_api_docs_page_links_back_to_the_site(client_for, alice):
    html = client_for(alice).get(reverse("api-docs")).content.decode()
    assert f'<a href="{reverse("home")}">' in html
