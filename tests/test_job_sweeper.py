"""Jobs are never stuck: heartbeats on running rows, the sweep that fails orphans and discards what they half
wrote, queued jobs sent again when their queue lost them, and duplicate messages dropped. The fault tests
with real processes (a worker killed with SIGKILL mid-job) are in tests/test_job_faults.py."""

from __future__ import annotations

import inspect
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
from core.jobs import sweeper
from core.jobs.heartbeat import WORKER_STOPPED, beating
from core.jobs.models import JobRow
from core.ops import broker
from tests.test_proxy_evaluation import crafted_run, questions
from training.checkpoints import state_dir
from training.models import ProxyEvaluation, RunStatus, Sample, SamplingRun, TrainingRun
from webgpt_site.celery import app

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


def sampled_run(alice, **fields) -> SamplingRun:
    """An unscored sampling run with one question stored whole (its one sample and episode)."""
    run = crafted_run(alice, None, questions(1), [[("Rayleigh scattering [1].", None)]])
    SamplingRun.objects.filter(pk=run.pk).update(**fields)
    return run


def proxy_evaluation(alice, **fields) -> ProxyEvaluation:
    evaluation = ProxyEvaluation.objects.create(owner=alice, reward_model_name="tiny-validation", **fields)
    evaluation.sampling_runs.set([sampled_run(alice, status=RunStatus.DONE)])
    return evaluation


def concrete_subclasses(model: type) -> set[type]:
    below = set(model.__subclasses__())
    below |= {deeper for sub in below for deeper in concrete_subclasses(sub)}
    return {sub for sub in below if not sub._meta.abstract}


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
    # A sampling run stores each question whole as its episodes end (one here): those stay, as on a cancel.
    orphan_sampling = sampled_run(
        alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=long_ago(), episodes_done=1
    )
    # An evaluation keeps its scores in its worker's memory until every sample is scored; one killed right
    # after storing its curves, before it was marked done, must not show them as if it had finished.
    orphan_evaluation = proxy_evaluation(
        alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=long_ago(), samples_total=1
    )
    ProxyEvaluation.objects.filter(pk=orphan_evaluation.pk).update(scores={"1": 0.5}, results={"runs": []})
    alive = training_run(alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=timezone.now())
    done = training_run(alice, status=RunStatus.DONE, started_at=long_ago(), heartbeat_at=long_ago())

    report = sweeper.sweep()

    assert report.failed == {
        "training run": [orphan_run.pk],
        "export": [orphan_export.pk],
        "corpus import": [orphan_import.pk],
        "sampling run": [orphan_sampling.pk],
        "proxy evaluation": [orphan_evaluation.pk],
    }
    orphans = (orphan_run, orphan_export, orphan_import, orphan_sampling, orphan_evaluation)
    for row in orphans:
        row.refresh_from_db()
        assert row.status == "failed" and row.error.startswith(WORKER_STOPPED) and row.finished_at
    assert "no heartbeat since" in orphan_run.error and orphan_import.error == WORKER_STOPPED
    assert not half_model.exists() and not part.exists() and not upload.exists()
    assert Sample.objects.filter(run=orphan_sampling).count() == orphan_sampling.episodes_done == 1
    # The scores so far stay, as on a cancel; the curves go.
    assert (orphan_evaluation.scores, orphan_evaluation.results) == (
        {"1": 0.5},
        {},
    )  # scores kept as on a cancel
    alive.refresh_from_db()
    done.refresh_from_db()
    assert (alive.status, done.status) == (RunStatus.RUNNING, RunStatus.DONE)
    assert sweeper.sweep().failed == {}  # nothing twice


def test_the_sweeper_finds_every_kind_of_job_and_each_names_a_registered_task_and_a_real_queue():
    """A new kind of job is a model inheriting JobRow: the sweeper must find it without a list to extend,
    and its task must be one a worker runs (as a worker does on start, the apps' tasks modules imported),
    on a queue workers listen to, taking the row's key as its keyword."""
    found = sweeper.job_models()
    assert len(found) == len(set(found))
    assert set(found) == concrete_subclasses(JobRow)
    assert {Export, CorpusImport, TrainingRun, SamplingRun, ProxyEvaluation} <= set(found)
    app.loader.import_default_modules()
    for model in found:
        assert model.task_name in app.tasks, f"{model.job_name}: no task {model.task_name!r}"
        assert model.queue in django_settings.CELERY_QUEUES, f"{model.job_name}: no queue {model.queue!r}"
        assert model.task_key in inspect.signature(app.tasks[model.task_name].run).parameters
    assert len({model.job_name for model in found}) == len(found)  # the sweep's report tells them apart


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


@pytest.mark.django_db(transaction=True)
def test_a_queued_proxy_evaluation_whose_queue_lost_its_message_is_sent_again(alice, broker_namespace):
    lost = proxy_evaluation(alice, samples_total=1)
    ProxyEvaluation.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert sweeper.queue_length("training") == 0
    assert sweeper.sweep().requeued == {"proxy evaluation": [lost.pk]}
    assert sweeper.sweep().requeued == {}  # its message is waiting now
    with broker.channel() as channel:
        message = channel.basic_get("training", no_ack=True)
        assert channel.basic_get("training", no_ack=True) is None  # sent once
    _args, kwargs, _embed = message.decode()
    assert (message.headers["task"], kwargs) == ("training.run_proxy_evaluation", {"evaluation_id": lost.pk})


def test_the_command_reports_what_it_swept(alice, capsys):
    run = training_run(alice, status=RunStatus.RUNNING, started_at=long_ago(), heartbeat_at=long_ago())
    call_command("sweep_jobs")
    assert f"failed 1 training run(s) whose worker stopped: [{run.pk}]" in capsys.readouterr().out
    call_command("sweep_jobs")
    assert "nothing to sweep" in capsys.readouterr().out


def test_an_orphan_run_that_may_resume_is_queued_again_until_its_attempts_are_used_up(
    alice, settings, tmp_path, broker_namespace
):
    """A training run whose settings allow it continues from its checkpoint (queued and sent again), as
    many times as they say; one without a checkpoint, or out of attempts, fails as before."""
    settings.MODEL_STORE_DIR = tmp_path / "models"
    dying = {"status": RunStatus.RUNNING, "started_at": long_ago(), "heartbeat_at": long_ago()}
    resumable = training_run(alice, **dying)
    TrainingRun.objects.filter(pk=resumable.pk).update(config={"resume_attempts": 1})
    (state_dir(resumable.pk) / "checkpoint-4").mkdir(parents=True)
    no_checkpoint = training_run(alice, **dying)
    TrainingRun.objects.filter(pk=no_checkpoint.pk).update(config={"resume_attempts": 1})
    not_asked = training_run(alice, **dying)
    (state_dir(not_asked.pk) / "checkpoint-4").mkdir(parents=True)

    report = sweeper.sweep()

    assert report.resumed == {"training run": [resumable.pk]}
    assert sorted(report.failed["training run"]) == sorted([no_checkpoint.pk, not_asked.pk])
    resumable.refresh_from_db()
    assert (resumable.status, resumable.resumes, resumable.error) == (RunStatus.QUEUED, 1, "")
    assert resumable.started_at is None and resumable.heartbeat_at is None
    assert "queued again to continue from the checkpoint of step 4 (resume 1 of 1)" in resumable.log
    assert broker.queue_lengths(["training"])["training"] == 1  # its message, sent again
    assert (state_dir(not_asked.pk) / "checkpoint-4").is_dir()  # a failed run may still be resumed by hand

    TrainingRun.objects.filter(pk=resumable.pk).update(**dying)  # its next worker dies too
    assert sweeper.sweep().failed == {"training run": [resumable.pk]}
    resumable.refresh_from_db()
    assert resumable.status == RunStatus.FAILED and resumable.resumes == 1
