"""The answer to a lost database connection, page by page: a 503 with Retry-After saying nothing was saved,
JSON for the API, the sentence for htmx, a page of its own (asking nothing of the database) otherwise;
other errors stay what they were. The real outage, PostgreSQL restarted under load, is in
tests/test_database_restart.py."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, OperationalError
from django.test import RequestFactory

from core.unavailable import MESSAGE, DatabaseUnavailableMiddleware, server_error

REFUSED = OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')


def middleware() -> DatabaseUnavailableMiddleware:
    return DatabaseUnavailableMiddleware(lambda request: None)


def test_an_api_call_gets_a_retryable_json_503():
    response = middleware().process_exception(RequestFactory().post("/api/tasks/3/submit"), REFUSED)
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert json.loads(response.content) == {"detail": MESSAGE, "retryable": True}


def test_an_htmx_swap_gets_the_sentence_and_a_page_gets_a_page_without_the_database():
    """No database mark: a query while rendering the page would raise here."""
    request = RequestFactory().post("/demonstrations/episodes/1/action", headers={"HX-Request": "true"})
    swap = middleware().process_exception(request, REFUSED)
    assert (swap.status_code, swap.content.decode()) == (503, MESSAGE)
    page = middleware().process_exception(RequestFactory().get("/tasks/next/"), REFUSED)
    assert page.status_code == 503 and "Try again in a moment" in page.content.decode()
    assert "Nothing was saved" in page.content.decode() and page["Cache-Control"] == "no-store"


def test_other_errors_are_left_to_django():
    assert middleware().process_exception(RequestFactory().get("/"), IntegrityError("duplicate")) is None
    assert middleware().process_exception(RequestFactory().get("/"), ValueError("bug")) is None


@pytest.mark.django_db
def test_the_500_handler_turns_an_outage_outside_a_view_into_a_503():
    request = RequestFactory().get("/console/")
    try:
        raise REFUSED  # as a middleware reading the session would
    except OperationalError:
        assert server_error(request).status_code == 503
    try:
        raise KeyError("a bug")
    except KeyError:
        assert server_error(request).status_code == 500
