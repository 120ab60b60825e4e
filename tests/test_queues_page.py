"""The queues page: staff see every queue's waiting messages and jobs, the running jobs with the age of their
heartbeat (silent ones marked), the queued ones, and the jobs failed because their worker stopped."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.models import Export, ExportFormat, ExportStatus
from core.jobs.heartbeat import WORKER_STOPPED
from core.models import WorkerPing
from core.workers import latest_pings
from tests.conftest import delete_broker_keys, make_user
from training.models import RunStatus, TrainingRun
from webgpt_site.queues import snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(alice):
    now = timezone.now()
    export = Export.objects.create(owner=alice, export_format=ExportFormat.RM_PAIRS, status=ExportStatus.DONE)
    alive = TrainingRun.objects.create(
        kind="rm", export=export, status=RunStatus.RUNNING, started_at=now, heartbeat_at=now
    )
    silent = TrainingRun.objects.create(
        kind="rm",
        export=export,
        status=RunStatus.RUNNING,
        started_at=now,
        heartbeat_at=now - timedelta(hours=1),
    )
    waiting = Export.objects.create(owner=alice, export_format=ExportFormat.RM_PAIRS)
    stopped = TrainingRun.objects.create(
        kind="rm",
        export=export,
        status=RunStatus.FAILED,
        error=f"{WORKER_STOPPED}; no heartbeat",
        finished_at=now,
    )
    return alive, silent, waiting, stopped


def test_the_snapshot_counts_each_queue_and_marks_silent_jobs(jobs, broker_namespace):
    alive, silent, waiting, stopped = jobs
    found = snapshot()
    queues = {queue["name"]: queue for queue in found["queues"]}
    assert found["broker_up"] and queues["exports"]["waiting"] == 0
    assert (queues["training"]["running"], queues["exports"]["queued"]) == (2, 1)
    assert {(job["id"], job["silent"]) for job in found["running"]} == {(alive.pk, False), (silent.pk, True)}
    assert [job["id"] for job in found["queued"]] == [waiting.pk]
    assert [job["id"] for job in found["failed"]] == [stopped.pk]


def test_only_staff_open_the_page(client_for, alice, jobs, django_user_model):
    assert client_for(alice).get("/console/queues/").status_code == 403  # a researcher, not staff
    staff = make_user(django_user_model, "sam", is_staff=True)
    page = client_for(staff).get("/console/queues/").content.decode()
    assert "silent: its worker stopped" in page and "alive" in page and WORKER_STOPPED in page
    partial = client_for(staff).get("/console/queues/", headers={"HX-Request": "true"}).content.decode()
    assert partial.startswith('<div id="queues"') and 'hx-trigger="every 5s"' in partial


def test_a_broker_that_does_not_answer_leaves_the_rows_visible(jobs, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:9/0"  # nothing listens on the discard port
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    found = snapshot()
    assert not found["broker_up"] and found["queues"][0]["waiting"] is None and len(found["running"]) == 2


def test_a_ping_behind_a_running_job_says_busy_not_no_worker(jobs, broker_namespace, client_for, alice):
    """A worker takes one job at a time: the ping of a queue whose job is running (its heartbeat live)
    waits behind it. After the patience, that queue is "busy with a job"; a queue with nothing running
    that did not answer has "no worker". The deploy check passes a busy queue."""
    client_for(alice).post("/console/workers/check/")
    asked_long_ago = timezone.now() - WorkerPing.PATIENCE - timedelta(seconds=1)
    WorkerPing.objects.update(requested_at=asked_long_ago)
    states = {ping.queue: ping.state for ping in latest_pings()}
    assert states == {
        "default": "no worker",
        "exports": "no worker",
        "training": "busy with a job",
        "sampling": "no worker",
    }
    page = client_for(alice).get("/console/workers/").content.decode()
    assert "busy with a job" in page and "no worker" in page

    out = io.StringIO()
    with pytest.raises(CommandError, match="3 queue"):
        call_command("check_workers", "--timeout", "0.3", stdout=out)
    busy = "training: no answer yet, but a job of this queue is running with a live heartbeat"
    assert busy in out.getvalue()
    delete_broker_keys(broker_namespace)
