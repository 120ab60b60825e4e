"""The database briefly unreachable (restarting, failing over, a network blip): a 503 that says so and
when to try again, instead of a 500. Nothing was saved by the request (its transaction rolled back), and
every write a person makes carries an idempotency key, so repeating it is safe even when the first try
did reach the database before the connection dropped.

Two entry points, one answer: ``DatabaseUnavailableMiddleware`` for errors raised by views (API views
included: DRF re-raises what it does not handle), and ``server_error`` (``handler500``) for the rest
(a middleware reading the session, say), where Django's handler still holds the exception.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.defaults import server_error as django_server_error

RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is unavailable for a moment. Nothing was saved; try again in a few seconds."
logger = logging.getLogger(__name__)


def is_outage(exc: BaseException | None) -> bool:
    """A lost or refused database connection (OperationalError: the server went away, refused, timed out;
    InterfaceError: the connection was already closed). Errors in our queries are ProgrammingError or
    IntegrityError and stay 500s or their own answers."""
    return isinstance(exc, OperationalError | InterfaceError)


def unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: JSON for the API, the sentence alone for htmx swaps (the pages show a refused
    swap's text where "saved" would be), a page otherwise."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": MESSAGE, "retryable": True}, status=503)
    elif request.headers.get("HX-Request"):
        response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    else:
        # No request context: its processors (the signed-in user's roles) would ask the database.
        response = HttpResponse(render_to_string("503.html", {"message": MESSAGE}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_outage(exception):
            return None
        logger.warning("database unavailable during %s %s: %s", request.method, request.path, exception)
        return unavailable(request)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a database outage raised outside a view is a 503 too; anything else is Django's 500."""
    if is_outage(sys.exc_info()[1]):
        return unavailable(request)
    return django_server_error(request)
