"""Redis restarted with jobs queued: a private redis-server (no persistence, as our machines run it) holds
an export's message, is killed and started again empty; the worker's sweep finds the row still queued with
its queue empty, sends the job again, and the export runs to the end. Nothing is lost."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from annotation.models import Export, ExportStatus
from tests.conftest import ROOT, running_worker
from tests.test_exports import judged_pair
from tests.test_training_jobs import worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def redis_server(port: int, folder: Path) -> Iterator[subprocess.Popen]:
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(folder)]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    try:
        yield server
    finally:
        server.kill()
        server.wait(timeout=10)


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"  # the worker's too, from VAR_DIR


def test_a_job_queued_when_redis_restarts_empty_runs_after_it_returns(
    settings, tmp_path, django_user_model, alice
):
    judged_pair(django_user_model)
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    env = worker_env(settings, tmp_path) | {"CELERY_BROKER_URL": broker, "CELERY_BROKER_KEY_PREFIX": ""}
    env |= {"JOB_SWEEP_SECONDS": "1", "JOB_REQUEUE_AFTER": "1"}
    request = (
        "from django.contrib.auth.models import User; from annotation.exports import service; "
        "print(service.request_export(User.objects.get(username='alice'), 'rm-pairs', {}).pk)"
    )
    with redis_server(port, tmp_path) as server:
        shell = [sys.executable, "manage.py", "shell", "-c", request]
        done = subprocess.run(
            shell, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
        )
        export = Export.objects.get(pk=int(done.stdout.split()[-1]))
        assert redis.Redis(port=port).llen("exports") == 1  # the message is on the broker
        server.kill()  # Redis dies, and with it (no persistence) every queued message
        server.wait(timeout=10)
    with redis_server(port, tmp_path):
        assert redis.Redis(port=port).llen("exports") == 0
        export.refresh_from_db()
        assert export.status == ExportStatus.QUEUED  # the row remembers what the broker forgot
        with running_worker(env, queues="exports"):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and export.status == ExportStatus.QUEUED:
                time.sleep(0.3)
                export.refresh_from_db()
            while time.monotonic() < deadline and export.status == ExportStatus.RUNNING:
                time.sleep(0.3)
                export.refresh_from_db()
    assert export.status == ExportStatus.DONE and export.row_count == 2
    assert (tmp_path / "media" / "exports" / export.file_name).is_file()
