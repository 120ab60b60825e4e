"""Jobs are never stuck: heartbeats on running rows, the sweep that fails orphans and discards what they half
wrote, queued jobs sent again when their queue lost them, and duplicate messages dropped. The fault tests
with real processes (a worker killed with SIGKILL mid-job) are in tests/test_job_faults.py."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.utils import timezone

from annotation.exports import service as exports
from annotation.models import Export, ExportFormat, ExportStatus
from browser.models import Corpus, CorpusImport, ImportStatus
from training.models import RunStatus, TrainingRun
from webgpt_site.jobs import sweeper
from webgpt_site.jobs.heartbeat import WORKER_STOPPED, beating

pytestmark = pytest.mark.django_db


def long_ago() -> timezone.datetime:
    return timezone.now() - timedelta(seconds=django_settings.JOB_HEARTBEAT_TIMEOUT + 5)


def queued_export(alice) -> Export:
    """A queued export row whose message was never sent (the tests decide what the broker holds)."""
    return Export.objects.create(owner=alice, export_format=ExportFormat.RM_PAIRS, filters={})


def training_run(alice, **fields) -> TrainingRun:
    export = queued_export(alice)
    Export.objects.filter(pk=export.pk).update(status=ExportStatus.DONE)
    return TrainingRun.objects.create(kind="rm", export=export, config={}, **fields)


def test_a_sweep_fails_each_kind_of_orphan_and_discards_what_it_half_wrote(alice, settings, tmp_path):
    settings.MODEL_STORE_DIR = tmp_path / "models"
    orphan_run = training_run(alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=long_ago())
    half_model = tmp_path / "models" / "runs" / f"run-{orphan_run.pk}"
    half_model.mkdir(parents=True)
    orphan_export = queued_export(alice)
    Export.objects.filter(pk=orphan_export.pk).update(status=ExportStatus.RUNNING, heartbeat_at=long_ago())
    part = exports.export_dir() / f".export-{orphan_export.pk}-abc.part"
    part.write_bytes(b'{"half": ')
    corpus = Corpus.objects.create(name="c")
    orphan_import = CorpusImport.objects.create(
        corpus=corpus, source="a.jsonl", source_format="jsonl", upload="u.jsonl", status=ImportStatus.RUNNING
    )  # claimed before heartbeats existed: no stamp at all
    upload = Path(django_settings.MEDIA_ROOT) / "corpus-imports" / "u.jsonl"
    upload.parent.mkdir(parents=True, exist_ok=True)
    upload.write_text("{}")
    alive = training_run(alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=timezone.now())
    done = training_run(alice, status=RunStatus.DONE, started_at=long_ago(), heartbeat_at=long_ago())

    report = sweeper.sweep()

    assert report.failed == {
        "training run": [orphan_run.pk],
        "export": [orphan_export.pk],
        "corpus import": [orphan_import.pk],
    }
    for row in (orphan_run, orphan_export, orphan_import):
        row.refresh_from_db()
        assert row.status == "failed" and row.error.startswith(WORKER_STOPPED) and row.finished_at
    assert "no heartbeat since" in orphan_run.error and orphan_import.error == WORKER_STOPPED
    assert not half_model.exists() and not part.exists() and not upload.exists()
    alive.refresh_from_db()
    done.refresh_from_db()
    assert (alive.status, done.status) == (RunStatus.RUNNING, RunStatus.DONE)
    assert sweeper.sweep().failed == {}  # nothing twice


def test_a_message_for_a_live_job_is_dropped_and_one_for_an_orphan_fails_it(alice):
    export = queued_export(alice)
    Export.objects.filter(pk=export.pk).update(status=ExportStatus.RUNNING, heartbeat_at=timezone.now())
    assert exports.run_export_job(export.pk).status == ExportStatus.RUNNING  # another worker has it
    Export.objects.filter(pk=export.pk).update(heartbeat_at=long_ago())
    failed = exports.run_export_job(export.pk)
    assert failed.status == ExportStatus.FAILED and failed.error.startswith(WORKER_STOPPED)


@pytest.mark.django_db(transaction=True)
def test_a_running_job_stamps_its_heartbeat_from_its_own_thread(alice):
    run = training_run(alice, status=RunStatus.RUNNING)
    with beating(TrainingRun, run.pk, every=0.05):
        first = TrainingRun.objects.get(pk=run.pk).heartbeat_at
        time.sleep(0.3)
        later = TrainingRun.objects.get(pk=run.pk).heartbeat_at
    assert first is not None and later > first
    stopped = TrainingRun.objects.get(pk=run.pk).heartbeat_at
    time.sleep(0.2)
    assert TrainingRun.objects.get(pk=run.pk).heartbeat_at == stopped  # the thread ended with the block


@pytest.mark.django_db(transaction=True)
def test_a_queued_job_whose_queue_lost_its_message_is_sent_again_once(alice, settings, broker_namespace):
    """Redis restarted without its data: the row says queued, the queue is empty. One sweep sends the task
    again; the next finds it waiting and sends nothing; a recent row is left to its own message."""
    lost = queued_export(alice)
    queued_export(alice)  # a recent one: its own message may still be on its way
    Export.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert sweeper.queue_length("exports") == 0
    assert sweeper.sweep().requeued == {"export": [lost.pk]}
    assert sweeper.queue_length("exports") == 1
    assert sweeper.sweep().requeued == {}  # the message is waiting now; `recent` was never sent


def test_the_command_reports_what_it_swept(alice, capsys):
    run = training_run(alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=long_ago())
    call_command("sweep_jobs")
    assert f"failed 1 training run(s) whose worker stopped: [{run.pk}]" in capsys.readouterr().out
    call_command("sweep_jobs")
    assert "nothing to sweep" in capsys.readouterr().out
