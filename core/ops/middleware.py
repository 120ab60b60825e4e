"""A request id and an access log line for every request; request metrics with bounded labels.

``RequestIdMiddleware`` goes first in ``MIDDLEWARE`` so that its id is set before anything else logs and its
duration covers every other middleware. A proxy's ``X-Request-ID`` is kept when it is a short token (so one
id follows a request through the proxy's log and ours); anything else (too long, spaces, quotes, line
breaks that could forge log lines) is replaced by a fresh id. The id goes back in the response header, so
a person reporting a problem can quote it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse
from django_prometheus import middleware as prometheus

from core.ops.logs import current_request_id

access_log = logging.getLogger("webgpt_site.access")

HEADER = "X-Request-ID"
_SANE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
# Probes called every few seconds: their successful answers are logged at DEBUG, not INFO.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def request_id_for(request: HttpRequest) -> str:
    given = request.headers.get(HEADER, "")
    return given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request.request_id = request_id_for(request)
        # Not reset when this returns: Django logs a 4xx/5xx ("Not Found: ...") after the middleware chain,
        # still for this request. Cleared when the response is closed (``request_finished``).
        current_request_id.set(request.request_id)
        response = self.get_response(request)
        response[HEADER] = request.request_id
        quiet = request.path in QUIET_PATHS and response.status_code < 400
        access_log.log(
            logging.DEBUG if quiet else logging.INFO,
            "%s %s %s",
            request.method,
            # Escaped: a decoded %0A in a path must not start a forged line in the text format.
            request.path.encode("unicode_escape").decode("ascii"),
            response.status_code,
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return response


def _request_finished(**kwargs: Any) -> None:
    current_request_id.set(None)


request_finished.connect(_request_finished, dispatch_uid="webgpt_site.ops.request_id")


class PrometheusAfterMiddleware(prometheus.PrometheusAfterMiddleware):
    """django-prometheus' middleware, with the request method folded to the standard ones in every label
    (its latency histogram takes the raw method, so odd methods sent by anyone would each add a series)."""

    def label_metric(
        self, metric: Any, request: HttpRequest, response: HttpResponse | None = None, **labels: str
    ) -> Any:
        if "method" in labels:
            labels["method"] = self._method(request)
        return super().label_metric(metric, request, response, **labels)
