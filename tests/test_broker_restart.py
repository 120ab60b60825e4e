"""Redis restarted with jobs queued: a private redis-server (no persistence, as our machines run it) holds
an export's message, is killed and started again empty; the worker's sweep finds the row still queued with
its queue empty, sends the job again, and the export runs to the end. Nothing is lost."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from annotation.models import Export, ExportStatus
from tests.conftest import ROOT, free_port, running_worker
from tests.test_exports import judged_pair
from tests.test_training_jobs import worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@contextmanager
def redis_server(folder: Path, port: int | None = None) -> Iterator[tuple[subprocess.Popen, int]]:
    """A private redis-server, on ``port`` or else on a free one. Redis takes no socket from us: the port
    is one found free a moment before, so when another process took it meanwhile, another is tried."""
    for _ in range(5 if port is None else 1):
        server, on = _start_redis(folder, port or free_port())
        if server is not None:
            break
    else:
        raise AssertionError(f"no port for a private redis-server ({port or 'five free ones'} taken)")
    try:
        yield server, on
    finally:
        server.kill()
        server.wait(timeout=10)


def _start_redis(folder: Path, port: int) -> tuple[subprocess.Popen | None, int]:
    """The server on ``port`` once it answers there; None if the port was taken."""
    log = folder / f"redis-{port}.log"  # a file, not a pipe: a full pipe would stall the server
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(folder), "--logfile", str(log)]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            # The one answering must be ours, not a server that had the port already.
            if client.info("server")["process_id"] == server.pid:
                return server, port
        except redis.ConnectionError:
            pass
        if server.poll() is not None:
            output = log.read_text(errors="replace") if log.exists() else ""
            if "in use" in output:
                return None, port
            raise AssertionError(f"redis-server exited: {output[-2000:]}")
        if time.monotonic() > deadline:
            server.kill()
            raise AssertionError(f"redis-server did not answer on port {port} in 10 s")
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"  # the worker's too, from VAR_DIR


def test_a_job_queued_when_redis_restarts_empty_runs_after_it_returns(
    settings, tmp_path, django_user_model, alice
):
    judged_pair(django_user_model)
    request = (
        "from django.contrib.auth.models import User; from annotation.exports import service; "
        "print(service.request_export(User.objects.get(username='alice'), 'rm-pairs', {}).pk)"
    )
    with redis_server(tmp_path) as (server, port):
        broker = f"redis://127.0.0.1:{port}/0"
        env = worker_env(settings, tmp_path) | {"CELERY_BROKER_URL": broker, "CELERY_BROKER_KEY_PREFIX": ""}
        env |= {"JOB_SWEEP_SECONDS": "1", "JOB_REQUEUE_AFTER": "1"}
        shell = [sys.executable, "manage.py", "shell", "-c", request]
        done = subprocess.run(
            shell, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
        )
        export = Export.objects.get(pk=int(done.stdout.split()[-1]))
        assert redis.Redis(port=port).llen("exports") == 1  # the message is on the broker
        server.kill()  # Redis dies, and with it (no persistence) every queued message
        server.wait(timeout=10)
    with redis_server(tmp_path, port):  # started again, empty, where the worker's broker URL points
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
