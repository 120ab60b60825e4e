"""Tasks run on a real Celery worker process: against Redis, and on the embedded first-run broker. Each test
run has its own namespace in Redis, so two runs sharing one database do not take each other's messages."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import AnonymousUser

from core.models import WorkerPing
from core.workers import request_pings
from tests.conftest import ROOT, database_url_for_tests, delete_broker_keys, running_worker

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def worker_env(**overrides: str) -> dict[str, str]:
    env = {**os.environ, "DEBUG": "1", "DATABASE_URL": database_url_for_tests(), **overrides}
    return {key: value for key, value in env.items() if value != ""}


def wait_for_answers(ping_ids: list[int], worker: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not WorkerPing.objects.filter(pk__in=ping_ids, answered_at__isnull=True).exists():
            return
        if worker.poll() is not None:
            pytest.fail(f"the worker exited: {worker.stdout.read().decode()}")
        time.sleep(0.2)
    pytest.fail("the worker did not answer in time")


def check_workers(env: dict[str, str], timeout: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "manage.py", "check_workers", "--timeout", str(timeout)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout + 60)


def test_a_task_enqueued_after_commit_runs_on_a_real_worker_via_redis(broker_namespace):
    assert settings.CELERY_BROKER_URL.startswith("redis://"), "make test runs the suite against Redis"
    pings = request_pings(AnonymousUser())  # commits, then enqueues one ping per queue
    assert not WorkerPing.objects.filter(answered_at__isnull=False).exists()
    with running_worker(worker_env(CELERY_BROKER_URL=settings.CELERY_BROKER_URL)) as worker:
        wait_for_answers([row.pk for row in pings], worker)
    answered = WorkerPing.objects.filter(pk__in=[row.pk for row in pings])
    assert sorted(answered.values_list("queue", flat=True)) == sorted(settings.CELERY_QUEUES)
    assert all(row.worker_hostname for row in answered)


def test_a_worker_in_another_namespace_does_not_take_this_runs_messages(broker_namespace):
    """Two test runs on one Redis database: the other run's worker answers its own pings (so it consumed
    its queues, FIFO, while ours waited there) and never ours; our own worker then answers ours."""
    ours = request_pings(AnonymousUser())
    other_run = worker_env(
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL, CELERY_BROKER_KEY_PREFIX=f"{broker_namespace}other-run:"
    )
    with running_worker(other_run):
        result = check_workers(other_run, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("answered by") == len(settings.CELERY_QUEUES)
    unanswered = WorkerPing.objects.filter(pk__in=[row.pk for row in ours], answered_at__isnull=True)
    assert unanswered.count() == len(settings.CELERY_QUEUES)
    with running_worker(worker_env(CELERY_BROKER_URL=settings.CELERY_BROKER_URL)) as worker:
        wait_for_answers([row.pk for row in ours], worker)


def test_emptying_this_runs_namespace_leaves_other_runs_keys_alone(broker_namespace):
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    ours, theirs = f"{broker_namespace}default", f"another-{broker_namespace}default"
    client.rpush(ours, "message")
    client.rpush(theirs, "message")
    try:
        assert delete_broker_keys(broker_namespace) == 1
        assert (client.exists(ours), client.lrange(theirs, 0, -1)) == (0, [b"message"])
    finally:
        client.delete(theirs)


def test_without_a_broker_the_first_run_worker_uses_the_embedded_transport(tmp_path):
    env = worker_env(CELERY_BROKER_URL="", VAR_DIR=str(tmp_path))
    with running_worker(env):
        result = check_workers(env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("answered by") == len(settings.CELERY_QUEUES)
    assert (tmp_path / "celery-broker").is_dir()


def test_check_workers_fails_clearly_when_no_worker_listens(tmp_path):
    env = worker_env(CELERY_BROKER_URL="", VAR_DIR=str(tmp_path))
    result = check_workers(env, timeout=1)
    assert result.returncode != 0
    expected = f"{len(settings.CELERY_QUEUES)} queue(s) got no answer within 1 s: is a worker running?"
    assert expected in result.stderr
