"""Training runs as jobs: checks before queueing, progress rows, the model registry, cancel, failures,
evaluation with a confidence interval, and the whole path on a real Celery worker."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from annotation.exports import service as exports
from annotation.models import Export, ExportFormat, ExportStatus, Question
from tests.conftest import database_url_for_tests, running_worker
from tests.test_api import api
from tests.test_exports import judged_pair
from tests.test_training import bc_rows, citing_pairs
from training.models import ModelCheckpoint, RunKind, TrainingRun
from training.models import RunStatus as Status
from training.runs import jobs

FAST = {"max_steps": 12, "batch_size": 8, "learning_rate": 2e-3, "eval_every": 6, "max_length": 64}


def questions(count: int, split: str = "rm") -> list[Question]:
    return [
        Question.objects.create(
            text=f"question {n} ({split})",
            key=hashlib.sha256(f"{split}{n}".encode()).hexdigest(),
            dataset="t",
            split=split,
        )
        for n in range(count)
    ]


def finished_export(owner, export_format: str, rows: list[dict]) -> Export:
    export = Export.objects.create(owner=owner, export_format=export_format, status=ExportStatus.DONE)
    export.file_name = f"export-{export.pk}-{export_format}.jsonl"
    exports.export_path(export).write_text("".join(json.dumps(r) + "\n" for r in rows))
    export.row_count = len(rows)
    export.save()
    return export


def rm_export(owner, count: int = 60, split: str = "rm") -> Export:
    ids = [q.pk for q in questions(count, split)]
    rows = [row | {"question_id": ids[n]} for n, row in enumerate(citing_pairs(count))]
    return finished_export(owner, ExportFormat.RM_PAIRS, rows)


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


pytestmark = pytest.mark.usefixtures("media", "model_store")


@pytest.mark.django_db
def test_a_reward_model_run_reports_progress_and_registers_its_model(alice, tiny_bert_dir):
    export = rm_export(alice)
    run = jobs.request_run(
        alice,
        RunKind.RM,
        export,
        FAST | {"base_model": str(tiny_bert_dir)},
        "fast",
        queue=False,
        local_paths=True,
    )
    assert run.status == Status.QUEUED and run.config["max_steps"] == 12
    run = jobs.run_training_job(run.pk)
    assert run.status == Status.DONE, run.error
    assert run.step == run.total_steps == 12 and run.percent == 100
    assert [e["step"] for e in run.timeline if "loss" in e] == list(range(1, 13))
    assert any("eval_accuracy" in e for e in run.timeline)
    checkpoint = run.checkpoint
    assert checkpoint.kind == RunKind.RM and Path(checkpoint.path).is_relative_to(
        django_settings.MODEL_STORE_DIR
    )
    assert (Path(checkpoint.path) / "config.json").is_file()
    assert checkpoint.metrics["eval_accuracy"] == run.metrics["eval_accuracy"]
    assert "60 rows from export" in run.log

    # Evaluating it on another export: accuracy with a 95% interval and calibration bins.
    held_out = rm_export(alice, 30, split="eval")
    evaluation = jobs.request_run(alice, RunKind.RM_EVAL, held_out, {}, "fast", checkpoint, queue=False)
    evaluation = jobs.run_training_job(evaluation.pk)
    assert evaluation.status == Status.DONE, evaluation.error
    low, high = evaluation.metrics["accuracy_ci95"]
    assert low <= evaluation.metrics["accuracy"] <= high and evaluation.metrics["decided_pairs"] == 30
    assert evaluation.metrics["calibration"] and evaluation.metrics["pairs"] == 30
    # An evaluation scores a model; it registers none of its own.
    assert list(ModelCheckpoint.objects.values_list("run", flat=True)) == [run.pk]

    # Deleting the model removes its folder from the store.
    jobs.delete_checkpoint(alice, checkpoint)
    assert not Path(checkpoint.path).exists() and not ModelCheckpoint.objects.exists()


@pytest.mark.django_db
def test_runs_that_cannot_work_are_refused_before_queueing(alice, tiny_bert_dir):
    export = rm_export(alice, 4)
    with pytest.raises(jobs.RunError, match="needs a bc-pairs export"):
        jobs.request_run(alice, RunKind.BC, export, {})
    with pytest.raises(jobs.RunError, match="learning_rate"):
        jobs.request_run(alice, RunKind.RM, export, {"learning_rate": 3})
    with pytest.raises(jobs.RunError, match="unknown setting"):
        jobs.request_run(alice, RunKind.RM, export, {"lr": 3})
    with pytest.raises(jobs.RunError, match="preset"):
        jobs.request_run(alice, RunKind.RM, export, {}, preset="huge")
    with pytest.raises(jobs.RunError, match="reward model to evaluate"):
        jobs.request_run(alice, RunKind.RM_EVAL, export, {})
    export.status = ExportStatus.RUNNING
    export.save()
    with pytest.raises(jobs.RunError, match="not finished"):
        jobs.request_run(alice, RunKind.RM, export, {})
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db
def test_training_refuses_data_with_evaluation_questions(alice, tiny_bert_dir):
    export = rm_export(alice, 6, split="eval")
    run = jobs.request_run(
        alice, RunKind.RM, export, FAST | {"base_model": str(tiny_bert_dir)}, queue=False, local_paths=True
    )
    run = jobs.run_training_job(run.pk)
    assert run.status == Status.FAILED and "6 question(s) of this export are in the eval split" in run.error
    assert not ModelCheckpoint.objects.exists()


@pytest.mark.django_db
def test_cancel_stops_a_running_job_and_a_queued_one_at_once(alice, tiny_llama_dir):
    ids = [q.pk for q in questions(10, "bc")]
    rows = [row | {"question_id": ids[row["question_id"]]} for row in bc_rows(10)]
    export = finished_export(alice, ExportFormat.BC_PAIRS, rows)
    settings_ = {"base_model": str(tiny_llama_dir), "max_steps": 40, "max_length": 64}
    run = jobs.request_run(alice, RunKind.BC, export, settings_, queue=False, local_paths=True)
    jobs.cancel_run(alice, TrainingRun.objects.get(pk=run.pk))
    assert TrainingRun.objects.get(pk=run.pk).status == Status.CANCELLED  # queued: cancelled at once
    TrainingRun.objects.filter(pk=run.pk).update(status=Status.QUEUED)  # as if it had started already
    run = jobs.run_training_job(run.pk)  # the flag is read after the first step
    assert run.status == Status.CANCELLED and run.step < 40
    assert "Cancelled after step" in run.log and "discarded" in run.log  # says what it kept and what not
    assert not ModelCheckpoint.objects.exists()
    assert not (Path(django_settings.MODEL_STORE_DIR) / "runs" / f"run-{run.pk}").exists()


@pytest.mark.django_db
def test_a_running_run_shows_the_time_left_at_the_rate_since_its_first_step(
    alice, tiny_bert_dir, client_for, monkeypatch
):
    """Issue 24: every long job shows an estimate of its time left; a training run's comes from the rate
    of its steps (loading the model and the data came before the first), and is gone once it ends."""
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    monkeypatch.setattr("core.progress.MIN_ELAPSED_S", 0.0)  # a rate from the first two steps
    settings_ = FAST | {"base_model": str(tiny_bert_dir), "max_steps": 4}
    run = jobs.request_run(alice, RunKind.RM, rm_export(alice, 20), settings_, queue=False, local_paths=True)
    estimates = []

    def watch(step: int, total: int, logs: dict) -> None:
        estimates.append(TrainingRun.objects.get(pk=run.pk).estimated_end_at)

    run = jobs.run_training_job(run.pk, echo=watch)
    assert run.status == Status.DONE, run.error
    assert any(estimates) and run.estimated_end_at is None
    TrainingRun.objects.filter(pk=run.pk).update(
        status=Status.RUNNING, estimated_end_at=timezone.now() + timedelta(minutes=1, seconds=30)
    )
    page = (
        client_for(alice).get(reverse("training:run", args=[run.pk]), HTTP_HX_REQUEST="true").content.decode()
    )
    assert "step 4 of 4" in page and "about 2 min left" in page


@pytest.mark.django_db
def test_the_banner_after_a_run_is_requested_stays_true_once_it_is_done(
    alice, client_for, django_capture_on_commit_callbacks
):
    """Issue 24: "Run 2 queued: ..." stayed over the page after its polled status said Done; whether it
    waits for a worker is the status's to say."""
    data = {"kind": "rm", "export": rm_export(alice, 20).pk, "preset": "fast"}
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(alice).post(reverse("training:new"), data, follow=True)
    run = TrainingRun.objects.get()
    banners = [str(message) for message in response.context["messages"]]
    assert banners == [f"Run {run.pk} requested: its status below follows it to the end."]
    assert "waiting for a worker on the <code>training</code> queue" in response.content.decode()


@pytest.mark.django_db
def test_a_crash_leaves_the_run_failed_with_the_reason(alice, tiny_bert_dir):
    export = rm_export(alice, 4)
    run = jobs.request_run(
        alice, RunKind.RM, export, FAST | {"base_model": str(tiny_bert_dir)}, queue=False, local_paths=True
    )
    exports.export_path(export).unlink()
    with pytest.raises(FileNotFoundError):
        jobs.run_training_job(run.pk)
    run.refresh_from_db()
    assert run.status == Status.FAILED and "FileNotFoundError" in run.error and run.finished_at
    # A message for a job another worker is running (a duplicate) changes nothing ...
    TrainingRun.objects.filter(pk=run.pk).update(status=Status.RUNNING, error="", heartbeat_at=timezone.now())
    half_written = Path(django_settings.MODEL_STORE_DIR) / "runs" / f"run-{run.pk}"
    half_written.mkdir(parents=True)
    assert jobs.run_training_job(run.pk).status == Status.RUNNING and half_written.exists()
    # ... but one found running with no heartbeat for the timeout belonged to a worker that died.
    silent = timezone.now() - timedelta(seconds=django_settings.JOB_HEARTBEAT_TIMEOUT + 1)
    TrainingRun.objects.filter(pk=run.pk).update(heartbeat_at=silent)
    run = jobs.run_training_job(run.pk)
    assert run.status == Status.FAILED and "stopped" in run.error and not half_written.exists()


@pytest.mark.django_db
def test_the_commands_train_from_an_export_or_a_file(alice, tiny_bert_dir, tmp_path, capsys):
    export = rm_export(alice, 12)
    options = {"base_model": str(tiny_bert_dir), "max_steps": 3, "max_length": 64}
    call_command("train_rm", export=export.pk, preset="fast", **options)
    out = capsys.readouterr().out
    assert "3/3" in out and "done: rm-run-" in out
    assert ModelCheckpoint.objects.get().run.export == export
    call_command("train_rm", data=exports.export_path(export), output=tmp_path / "m", **options)
    assert (tmp_path / "m" / "reward.json").is_file() and ModelCheckpoint.objects.count() == 1
    with pytest.raises(CommandError, match="needs a bc-pairs export"):
        call_command("train_bc", export=export.pk)
    with pytest.raises(CommandError, match="--output is required"):
        call_command("train_bc", data=exports.export_path(export))


def worker_env(settings, tmp_path: Path) -> dict[str, str]:
    """A training worker's environment: this test's database, model store and broker."""
    return {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "MODEL_STORE_DIR": str(settings.MODEL_STORE_DIR),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "OMP_WAIT_POLICY": "PASSIVE",
        "PATH": "/usr/bin:/bin",
    }


def wait_until_finished(run_id: int, seconds: float = 180) -> TrainingRun:
    """The run's row once the worker has finished it (or as it is when the time is up)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not TrainingRun.objects.get(pk=run_id).is_finished:
        time.sleep(0.3)
    return TrainingRun.objects.get(pk=run_id)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_export_then_train_on_a_real_worker(
    settings, tmp_path, django_user_model, alice, tiny_bert_dir, broker_namespace
):
    """Labels -> an rm-pairs export (the export job) -> a run on the training queue -> a registered model."""
    judged_pair(django_user_model)
    export = exports.run_export_job(exports.request_export(alice, ExportFormat.RM_PAIRS, {}).pk)
    assert export.status == ExportStatus.DONE and export.row_count == 2
    run = jobs.request_run(
        alice,
        RunKind.RM,
        export,
        {"base_model": str(tiny_bert_dir), "max_steps": 4},
        "fast",
        local_paths=True,
    )
    with running_worker(worker_env(settings, tmp_path), queues="training"):
        run = wait_until_finished(run.pk)
    assert run.status == Status.DONE, run.error
    assert run.timeline and run.step == 4
    assert ModelCheckpoint.objects.get().run == run


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_bc_run_asked_for_over_the_api_reaches_done_on_a_real_worker(
    settings, tmp_path, alice, tiny_llama_dir, broker_namespace
):
    """A researcher's path to a policy: a bc-pairs export, a BC run continuing a registered model asked for
    over the API, the training worker, Done, and a registered model that loads and generates."""
    ids = [q.pk for q in questions(10, "bc")]
    rows = [row | {"question_id": ids[row["question_id"]]} for row in bc_rows(10)]
    export = finished_export(alice, ExportFormat.BC_PAIRS, rows)
    start = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-llama", base_model="random", path=str(tiny_llama_dir)
    )
    body = {
        "kind": "bc",
        "export": export.pk,
        "base_checkpoint": start.pk,
        "settings": {"max_steps": 4, "max_length": 64, "eval_every": 2, "validation_fraction": 0.2},
    }
    response = api(alice).post("/api/training-runs", body, format="json")
    assert response.status_code == 202, response.content
    with running_worker(worker_env(settings, tmp_path), queues="training"):
        run = wait_until_finished(response.json()["id"])
    assert run.status == Status.DONE, run.error
    assert run.step == run.total_steps == 4
    assert [entry["step"] for entry in run.timeline if "loss" in entry] == [1, 2, 3, 4]
    assert run.metrics["train_loss"] > 0 and 0 < run.metrics["eval_loss"] < 20
    assert run.metrics["validation_examples"] > 0
    assert run.metrics["train_examples"] + run.metrics["validation_examples"] == len(rows)
    trained = ModelCheckpoint.objects.get(run=run)
    assert (trained.kind, trained.name, trained.base_model) == (RunKind.BC, f"bc-run-{run.pk}", "tiny-llama")
    assert trained.metrics["eval_loss"] == run.metrics["eval_loss"]
    assert Path(trained.path).is_relative_to(settings.MODEL_STORE_DIR)

    from training.runs.bc import load_policy

    model, tokenizer = load_policy(Path(trained.path))
    before, _ = load_policy(tiny_llama_dir)
    assert model.config.num_hidden_layers == 2
    assert not torch.equal(
        model.model.layers[0].mlp.up_proj.weight, before.model.layers[0].mlp.up_proj.weight
    )
    prompt = tokenizer("Question: where is the river?\nNext action:", return_tensors="pt")
    out = model.generate(**prompt, min_new_tokens=3, max_new_tokens=3, do_sample=False)
    assert out.shape[1] == prompt["input_ids"].shape[1] + 3


@pytest.mark.django_db
def test_the_demo_ships_truthfulqa_judgements_a_reward_model_can_train_on(demo_data, alice):
    """load_demo imports TruthfulQA's best-vs-incorrect answers as imported comparisons; an rm-pairs export
    of the rm split holds only rm questions, so training accepts it."""
    from annotation.feedback.demo import create_reference_comparisons
    from annotation.models import ImportedComparison

    count = ImportedComparison.objects.filter(source="truthfulqa-reference").count()
    assert count > 500 and create_reference_comparisons() == 0  # idempotent
    export = exports.run_export_job(exports.request_export(alice, ExportFormat.RM_PAIRS, {"split": "rm"}).pk)
    rows = [json.loads(line) for line in exports.export_path(export).read_text().splitlines()]
    assert 0 < len(rows) < count
    assert set(
        Question.objects.filter(pk__in={r["question_id"] for r in rows}).values_list("split", flat=True)
    ) == {"rm"}
    jobs.check_splits(rows)  # no eval question: accepted
    everything = exports.run_export_job(exports.request_export(alice, ExportFormat.RM_PAIRS, {}).pk)
    with pytest.raises(jobs.RunError, match="eval split"):
        jobs.check_splits(
            [json.loads(line) for line in exports.export_path(everything).read_text().splitlines()]
        )


@pytest.mark.django_db
def test_a_run_queued_again_where_its_checkpoint_is_not_starts_over_and_says_so(alice, tiny_bert_dir):
    config = FAST | {"base_model": str(tiny_bert_dir), "max_steps": 4}
    run = jobs.request_run(alice, RunKind.RM, rm_export(alice), config, "fast", queue=False, local_paths=True)
    TrainingRun.objects.filter(pk=run.pk).update(resumes=1)  # its checkpoint is on the machine that died
    run = jobs.run_training_job(run.pk)
    assert run.status == Status.DONE and run.step == 4
    assert "No checkpoint of this run on this machine" in run.log and "starts again from step 0" in run.log
    assert "Continued from" not in run.log


@pytest.mark.django_db
def test_a_folder_trained_by_the_file_form_is_registered_by_command(tmp_path, tiny_bert_dir):
    out = tmp_path / "rm-16gpu"
    data = tmp_path / "rm.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in citing_pairs(8)))
    settings_ = ["--base-model", str(tiny_bert_dir), "--max-steps", "2", "--max-length", "64"]
    call_command("train_rm", "--data", str(data), "--output", str(out), *settings_)
    call_command("register_model", str(out), "--name", "rm-16gpu")
    registered = ModelCheckpoint.objects.get(name="rm-16gpu")
    assert (registered.kind, registered.path, registered.storage_name) == (RunKind.RM, str(out), "")
    assert "train_loss" in registered.metrics and registered.base_model == str(tiny_bert_dir)
    with pytest.raises(CommandError, match="not a trained model folder"):
        call_command("register_model", str(tmp_path))
