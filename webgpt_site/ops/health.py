"""Probes for load balancers and orchestrators: ``/healthz`` (this process answers) and ``/readyz`` (it can
do its work: database, broker and storage reachable).

Both are anonymous (a load balancer has no account), never cached, and never a 500: a failing check is a
503 naming the check, with the exception's class as the reason and nothing more (no URL, host or path: the
details go to the log, which only operators read). ``/healthz`` touches nothing, so a database outage does
not make every web process look dead and get restarted in a loop; ``/readyz`` is what takes a process out
of the balancer's rotation while its dependencies are away.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from core.ops import broker
from core.storage import check_reachable

logger = logging.getLogger(__name__)


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def check_storage() -> None:
    """Every storage of produced files can be written (a local folder) or reached (the bucket), and the
    model store's folder (base models, workers' caches) takes a new file."""
    check_reachable()
    folder = settings.MODEL_STORE_DIR
    Path(folder).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".readyz-"):
        pass


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "broker": broker.check,
    "storage": check_storage,
}


def run_checks() -> dict[str, dict]:
    """Each check's result and time, in order; every exception is a failed check, none escapes."""
    results = {}
    for name, check in CHECKS.items():
        started = time.perf_counter()
        result: dict = {"ok": True}
        try:
            check()
        except Exception as exc:
            logger.warning("readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
            result = {"ok": False, "error": type(exc).__name__}
        result["ms"] = round((time.perf_counter() - started) * 1000, 1)
        results[name] = result
    return results


@login_not_required
@never_cache
@require_http_methods(["GET", "HEAD"])
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving requests. No database, no broker: see the module's docstring."""
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_http_methods(["GET", "HEAD"])
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when every check passes, else 503 with ``failed`` naming the checks that did not."""
    checks = run_checks()
    failed = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "unavailable" if failed else "ok", "failed": failed, "checks": checks}
    return JsonResponse(body, status=503 if failed else 200)
