"""The queues page: staff see every queue's waiting messages and jobs, the running jobs with the age of their
heartbeat (silent ones marked), the queued ones, and the jobs failed because their worker stopped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Export, ExportFormat, ExportStatus
from tests.conftest import make_user
from training.models import RunStatus, TrainingRun
from webgpt_site.heartbeat import WORKER_STOPPED
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
