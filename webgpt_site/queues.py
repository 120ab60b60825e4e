"""The queues page (``/console/queues/``, staff only: the people with the admin login): what Flower
would show an operator of this platform, read from our own rows and the broker, with no extra process to
run. Per queue: messages waiting on the broker, the last worker ping, jobs running and queued; every running
job with the age of its heartbeat (a silent one is failed by the next sweep: core/jobs/sweeper.py); the
latest jobs failed because their worker stopped. Refreshes itself every 5 seconds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from core.jobs.heartbeat import WORKER_STOPPED, stale_before
from core.jobs.sweeper import job_models
from core.ops import broker
from core.workers import latest_pings

RECENT_FAILURES = 10
LISTED = 20  # queued jobs listed per kind (all are counted)


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous callers go to the admin's login; signed-in people who are not staff get 403."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return guarded


def _age(moment: datetime | None, now: datetime) -> float | None:
    return (now - moment).total_seconds() if moment else None


def snapshot(now: datetime | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain data (also what the tests read)."""
    now = now or timezone.now()
    try:
        waiting: dict[str, int] | None = broker.queue_lengths()
    except Exception:  # the broker is down: the page still shows the rows
        waiting = None
    stale = stale_before(now)
    queues = {
        name: {"name": name, "waiting": None, "running": 0, "queued": 0} for name in settings.CELERY_QUEUES
    }
    running, queued, failed = [], [], []
    for kind in job_models():
        rows = kind.objects
        for row in rows.filter(status="running").order_by("started_at"):
            beat = row.heartbeat_at or row.started_at
            running.append(
                {
                    "kind": kind.job_name,
                    "id": row.pk,
                    "queue": kind.queue,
                    "started": row.started_at,
                    "heartbeat_age": _age(beat, now),
                    "silent": beat is None or beat < stale,
                }
            )
            queues[kind.queue]["running"] += 1
        waiting_rows = rows.filter(status="queued")
        queues[kind.queue]["queued"] += waiting_rows.count()
        for row in waiting_rows.order_by("created_at")[:LISTED]:  # the oldest: a queue that does not move
            queued.append(
                {"kind": kind.job_name, "id": row.pk, "queue": kind.queue, "age": _age(row.created_at, now)}
            )
        stopped = rows.filter(status="failed", error__startswith=WORKER_STOPPED).order_by("-finished_at")
        failed += [{"kind": kind.job_name, "id": row.pk, "finished": row.finished_at, "error": row.error}
                   for row in stopped[:RECENT_FAILURES]]  # fmt: skip
    pings = {ping.queue: ping for ping in latest_pings()}
    for name, queue in queues.items():
        queue["waiting"] = waiting.get(name) if waiting is not None else None
        queue["ping"] = pings.get(name)
    failed.sort(key=lambda row: row["finished"] or now, reverse=True)
    return {
        "queues": list(queues.values()),
        "broker_up": waiting is not None,
        "running": running,
        "queued": queued,
        "failed": failed[:RECENT_FAILURES],
        "timeout": settings.JOB_HEARTBEAT_TIMEOUT,
    }


@require_GET
@staff_required
@vary_on_headers("HX-Request")
def queues(request: HttpRequest) -> HttpResponse:
    template = "console/_queues.html" if request.htmx else "console/queues.html"
    return render(request, template, snapshot())
