"""Workers killed mid-job with SIGKILL, as a crash or the kernel's out-of-memory killer would: an export, a
reward-model run, a sampling run and a corpus import on Redis, and a reward-model run on ``make run``'s
embedded broker (which never redelivers); a proxy evaluation's in tests/test_proxy_evaluation_worker.py. In
every case the next worker's sweep fails the job with the reason within seconds, nothing half written is
published, and the job was never run twice."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db.models import Model

from annotation.exports import service as exports
from annotation.models import EpisodeStatus, ExportFormat, ExportStatus
from browser.import_jobs import staging_dir
from browser.models import Corpus, CorpusImport, ImportStatus
from browser.services import backend_for, import_corpus
from core.jobs.heartbeat import WORKER_STOPPED
from tests.conftest import ROOT, database_url_for_tests, running_worker
from tests.test_corpus_import_jobs import PAGES, post_api, upload, write
from tests.test_exports import judged_pair
from tests.test_sampling_jobs import TINY, questions, sampling_worker_env
from tests.test_training_jobs import worker_env
from training.models import ModelCheckpoint, RunKind, RunStatus, Sample, TrainingRun
from training.runs import jobs
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Heartbeats every second, orphans after three: the sweep of the next worker finds the dead job at once.
FAST_LIVENESS = {"JOB_HEARTBEAT_SECONDS": "1", "JOB_HEARTBEAT_TIMEOUT": "3", "JOB_SWEEP_SECONDS": "1"}


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"  # the workers' too, from VAR_DIR


def wait_for(row: Model, ready: Callable[[Model], bool], seconds: float = 120) -> Model:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row.refresh_from_db()
        if ready(row):
            return row
        time.sleep(0.2)
    raise AssertionError(f"{row!r} never got there: {row.status} {getattr(row, 'error', '')}")


def kill_while_running(
    env: dict[str, str], queue: str, row: Model, running: Callable[[Model], bool]
) -> Model:
    """Start a worker, SIGKILL it once ``running(row)``, then start another and return the row it left."""
    with running_worker(env, queues=queue) as worker:
        wait_for(row, running)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    with running_worker(env, queues=queue):
        return wait_for(row, lambda r: r.status not in ("queued", "running"), seconds=30)


@contextmanager
def paused_at_progress(table: str, column: str, above: int = 0) -> Iterator[Callable[[], bool]]:
    """While the block runs, a job's first write of ``column`` above ``above`` on its running row of
    ``table`` (its progress, written while it works) waits there (``paused_at``). Yields ``paused()``."""
    event = f"UPDATE OF {column}"
    with paused_at(table, event, f"NEW.{column} > {int(above)} AND NEW.status = 'running'") as paused:
        yield paused


@contextmanager
def paused_at(table: str, event: str, condition: str) -> Iterator[Callable[[], bool]]:
    """While the block runs, the first ``event`` (``INSERT``, ``UPDATE OF column``) of a row of ``table``
    for which ``condition`` holds waits there: a trigger takes an advisory lock this connection holds.
    Yields ``paused()``, true once a worker waits on it. The lock goes when the block ends (then the
    trigger: dropping it waits for the paused write to end)."""
    key = secrets.randbits(62)
    with psycopg.connect(database_url_for_tests(), autocommit=True) as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", [key])
        gate.execute(
            f"CREATE FUNCTION pause_{table}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_advisory_xact_lock({key}); RETURN NEW; END $$"
        )
        gate.execute(
            f"CREATE TRIGGER pause_progress BEFORE {event} ON {table} FOR EACH ROW "
            f"WHEN ({condition}) EXECUTE FUNCTION pause_{table}()"
        )
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        )
        try:
            yield lambda: gate.execute(waiting).fetchone()[0] > 0
        finally:
            gate.execute("SELECT pg_advisory_unlock(%s)", [key])
            gate.execute(f"DROP TRIGGER pause_progress ON {table}")
            gate.execute(f"DROP FUNCTION pause_{table}()")


def kill_when_paused(env: dict[str, str], queue: str, row: Model, table: str, column: str) -> Model:
    """Start a worker, SIGKILL it while its job waits at its first progress write (``paused_at_progress``:
    halfway through its work, deterministically), then start another and return the row it left."""
    with paused_at_progress(table, column) as paused, running_worker(env, queues=queue) as worker:
        wait_for(row, lambda _: paused())
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    with running_worker(env, queues=queue):
        return wait_for(row, lambda r: r.status not in ("queued", "running"), seconds=30)


def test_an_export_whose_worker_is_killed_fails_and_publishes_nothing(
    settings, tmp_path, django_user_model, alice, broker_namespace
):
    judged_pair(django_user_model)
    env = worker_env(settings, tmp_path) | FAST_LIVENESS
    export = exports.request_export(alice, ExportFormat.RM_PAIRS, {})  # queued at once: no transaction here
    # Hold the judgements' table so the export blocks inside its query: killed there, deterministically.
    with psycopg.connect(database_url_for_tests()) as blocker:
        blocker.execute("LOCK TABLE annotation_assignment IN ACCESS EXCLUSIVE MODE")
        with running_worker(env, queues="exports") as worker:
            wait_for(export, lambda e: e.status == ExportStatus.RUNNING and e.heartbeat_at is not None)
            time.sleep(1)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
        blocker.rollback()
    with running_worker(env, queues="exports"):
        export = wait_for(export, lambda e: e.status != ExportStatus.RUNNING, seconds=30)
    assert export.status == ExportStatus.FAILED and export.error.startswith(WORKER_STOPPED)
    assert export.file_name == "" and export.sha256 == ""
    assert list((tmp_path / "media" / "exports").iterdir()) == []  # no file, not even a .part


def test_a_reward_model_run_whose_worker_is_killed_fails_and_registers_nothing(
    settings, tmp_path, django_user_model, alice, tiny_bert_dir, broker_namespace, model_store
):
    judged_pair(django_user_model)
    export = exports.run_export_job(exports.request_export(alice, ExportFormat.RM_PAIRS, {}).pk)
    config = {"base_model": str(tiny_bert_dir), "max_steps": 1_000_000}
    run = jobs.request_run(alice, RunKind.RM, export, config, "fast", local_paths=True)
    env = worker_env(settings, tmp_path) | FAST_LIVENESS
    run = kill_while_running(env, "training", run, lambda r: r.step >= 1)
    assert run.status == RunStatus.FAILED and run.error.startswith(WORKER_STOPPED)
    assert not ModelCheckpoint.objects.exists()
    assert not jobs.output_dir(run.pk).exists()  # the half-trained model is gone


def test_a_sampling_run_whose_worker_is_killed_fails_keeping_only_whole_questions(
    settings, tmp_path, alice, freshwiki, tiny_llama_dir, broker_namespace, model_store
):
    policy = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="x", path=str(tiny_llama_dir)
    )
    questions(30)
    settings_ = TINY | {"n": 1, "max_actions": 20}
    request = SamplingRequest(
        policy=policy, questions=QuestionSet(dataset="demo", limit=30), settings=settings_
    )
    run = request_sampling(alice, request)
    env = sampling_worker_env(settings, tmp_path) | FAST_LIVENESS
    env["SAMPLING_BATCH"] = "1"  # one question per chunk: several chunks stored before the kill
    stored = Sample.objects.filter(run=run)
    run = kill_while_running(env, "sampling", run, lambda r: stored.exists())  # killed after a chunk
    assert run.status == RunStatus.FAILED and run.error.startswith(WORKER_STOPPED)
    # Each chunk (here one question) is stored in one transaction with its episode, actions and pages, so
    # what is there is whole; episodes finished but not yet stored went with the worker.
    assert 1 <= stored.count() < 30 and stored.count() <= run.episodes_done
    for sample in stored.select_related("episode"):
        assert sample.episode.status == EpisodeStatus.FINISHED
        assert sample.episode.actions.count() == sample.actions >= 1


def test_on_the_embedded_broker_a_killed_training_worker_leaves_no_run_stuck(
    settings, tmp_path, django_user_model, alice, tiny_bert_dir, model_store
):
    """``make run`` has no Redis: its filesystem broker never redelivers a message whose worker died, so
    before heartbeats the run stayed "running" at its step for good, even after a new worker started."""
    judged_pair(django_user_model)
    export = exports.run_export_job(exports.request_export(alice, ExportFormat.RM_PAIRS, {}).pk)
    env = {
        k: v for k, v in worker_env(settings, tmp_path).items() if k != "CELERY_BROKER_URL"
    } | FAST_LIVENESS
    env["CELERY_BROKER_KEY_PREFIX"] = ""  # no Redis namespace: the broker is VAR_DIR/celery-broker
    request = (
        "from django.contrib.auth.models import User; from annotation.models import Export; "
        "from training.runs import jobs; alice = User.objects.get(username='alice'); "
        f"run = jobs.request_run(alice, 'rm', Export.objects.get(pk={export.pk}), "
        f"{{'base_model': {str(tiny_bert_dir)!r}, 'max_steps': 1000000}}, 'fast', "
        "local_paths=True); print(run.pk)"
    )
    shell = [sys.executable, "manage.py", "shell", "-c", request]
    done = subprocess.run(shell, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120)
    run = TrainingRun.objects.get(pk=int(done.stdout.split()[-1]))
    assert (tmp_path / "celery-broker").is_dir()  # queued on the embedded broker, not on Redis
    run = kill_while_running(env, "training", run, lambda r: r.step >= 1)
    assert run.status == RunStatus.FAILED and run.error.startswith(WORKER_STOPPED)
    assert not ModelCheckpoint.objects.exists() and not jobs.output_dir(run.pk).exists()


def test_a_corpus_import_whose_worker_is_killed_mid_index_fails_leaving_the_index_and_no_upload(
    settings, tmp_path, alice, broker_namespace
):
    import_corpus("mine", write(tmp_path / "first.jsonl", PAGES))  # the corpus as it was: two pages
    # Indexing 100,000 records takes seconds, so the job writes its progress (at most once a second) while
    # it indexes; the first such write waits for the kill.
    pages = b"".join(
        json.dumps({"url": f"https://example.org/new-{i}", "title": f"N{i}", "text": "kilo lima"}).encode()
        + b"\n"
        for i in range(100_000)
    )
    assert post_api(alice, corpus="mine", file=upload("big.jsonl", pages)).status_code == 202
    job = CorpusImport.objects.get(status=ImportStatus.QUEUED)
    assert (staging_dir() / job.upload).exists()
    env = worker_env(settings, tmp_path) | FAST_LIVENESS
    env["CORPUS_INDEX_DIR"] = str(settings.CORPUS_INDEX_DIR)
    job = kill_when_paused(env, "exports", job, "browser_corpusimport", "progress")
    assert job.status == ImportStatus.FAILED and job.error.startswith(WORKER_STOPPED)
    assert job.record_count is None
    assert list(staging_dir().iterdir()) == []  # the upload is removed
    index = backend_for("mine")
    assert index.count() == Corpus.objects.get(name="mine").document_count == 2
    assert index.search("kilo") == []  # nothing the killed worker added was committed
    # Nor did it leave a lock behind: the next import of the corpus goes through.
    import_corpus("mine", write(tmp_path / "again.jsonl", pages[: pages.index(b"\n") + 1]))
    assert index.count() == 3
