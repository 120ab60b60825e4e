"""Training across processes and after a crash, on real Celery workers of the ``training`` queue
(training/runs/processes.py): a run asked for with 2 processes is trained by 2 processes under torchrun (the
gloo backend on this CPU) with its progress, log and cancel working across them, and learns as one process
with twice the batch; a run whose worker is killed with SIGKILL mid-run (its processes die with it) is
queued again by the next worker's sweep, continues from its last checkpoint and ends where the
uninterrupted run ends, for BC, the reward model and RL. tests/test_training_resume.py checks the trainers'
checkpoints without workers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from annotation.models import ExportFormat
from tests.conftest import running_worker
from tests.test_job_faults import FAST_LIVENESS, paused_at, paused_at_progress, wait_for
from tests.test_rl_runs import answered, model
from tests.test_rl_runs import questions as rl_questions
from tests.test_sampling_core import seeded_tiny_llama
from tests.test_training import bc_rows
from tests.test_training_jobs import finished_export, questions, rm_export, worker_env
from tests.tiny_models import smollm2_tokenizer, tiny_reward_model
from training.checkpoints import state_dir
from training.models import ModelCheckpoint, RLEpisode, RunKind, RunStatus, TrainingRun
from training.rl.inputs import RLRequest
from training.rl.runs import request_rl_run
from training.runs import jobs

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("model_store"),
]

# Two processes each average the loss over their half of the batch and DDP averages the two gradients; one
# process averages over the whole batch. With every example of the same size (below) the two are the same
# mean: the curves then differ only by the order of float additions.
TWICE_THE_BATCH_TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture(scope="module")
def bert_without_dropout(tiny_bert_dir, tmp_path_factory) -> Path:
    """The tiny BERT with dropout off: with it on, each process draws its own masks and the curves of one
    and two processes differ by the draws, not by the training."""
    folder = tmp_path_factory.mktemp("bert-no-dropout")
    shutil.copytree(tiny_bert_dir, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config |= {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def bc_export(owner, count: int = 16):
    """bc-pairs whose completions are all as many tokens long: the loss is a mean over completion tokens,
    which two processes with half a batch each reach only when the halves weigh the same."""
    tokenizer = smollm2_tokenizer()
    rows = bc_rows(count)
    sizes = [len(tokenizer(row["completion"], add_special_tokens=False)["input_ids"]) for row in rows]
    rows = [row for row, size in zip(rows, sizes, strict=True) if size == max(set(sizes), key=sizes.count)]
    ids = [q.pk for q in questions(count, "bc")]
    rows = [row | {"question_id": ids[row["question_id"]]} for row in rows]
    assert len(rows) >= 8
    return finished_export(owner, ExportFormat.BC_PAIRS, rows)


def losses(run: TrainingRun) -> dict[int, float]:
    return {int(entry["step"]): entry["loss"] for entry in run.timeline if "loss" in entry}


def trainer_run(kind: str, owner, base: Path, export=None, **settings) -> TrainingRun:
    """A BC or reward-model run on ``export`` (a new one by default), queued at once: these tests commit."""
    export = export or (bc_export(owner) if kind == RunKind.BC else rm_export(owner, 32))
    config = {"batch_size": 4, "learning_rate": 3e-3, "validation_fraction": 0, "max_length": 64}
    config |= {"base_model": str(base)} | settings
    return jobs.request_run(owner, kind, export, config, "fast", local_paths=True)


def training_processes(worker: subprocess.Popen) -> list[psutil.Process]:
    """The run's processes under ``worker`` (psutil comes with accelerate): torchrun's agent's children."""
    below = psutil.Process(worker.pid).children(recursive=True)
    return [
        p
        for p in below
        if "train_process" in " ".join(p.cmdline()) and "training.runs.agent" not in p.cmdline()
    ]


@pytest.mark.parametrize("kind", [RunKind.BC, RunKind.RM])
def test_two_processes_on_a_worker_learn_as_one_process_with_twice_the_batch(
    kind, settings, tmp_path, alice, tiny_llama_dir, bert_without_dropout, broker_namespace
):
    base = tiny_llama_dir if kind == RunKind.BC else bert_without_dropout
    two = trainer_run(kind, alice, base, max_steps=6, processes=2)
    with running_worker(worker_env(settings, tmp_path), queues="training"):
        two = wait_for(two, lambda r: r.is_finished, seconds=180)
    assert two.status == RunStatus.DONE, (two.error, two.log)
    assert "Training in 2 processes" in two.log and two.step == two.total_steps == 6
    assert ModelCheckpoint.objects.filter(run=two).exists()
    assert not state_dir(two.pk).exists()  # nothing left to resume once done

    one = jobs.run_training_job(trainer_run(kind, alice, base, two.export, max_steps=6, batch_size=8).pk)
    assert losses(two).keys() == losses(one).keys() == set(range(1, 7))
    for step, loss in losses(one).items():
        assert losses(two)[step] == pytest.approx(loss, rel=TWICE_THE_BATCH_TOLERANCE), step
    assert losses(two)[6] < losses(two)[1]  # it learned


def test_a_cancel_stops_every_process_of_a_run_after_the_same_step(
    settings, tmp_path, alice, tiny_llama_dir, broker_namespace
):
    run = trainer_run(RunKind.BC, alice, tiny_llama_dir, max_steps=100_000, processes=2)
    with running_worker(worker_env(settings, tmp_path), queues="training") as worker:
        wait_for(run, lambda r: r.step >= 2, seconds=120)
        launched = training_processes(worker)
        assert len(launched) == 2
        jobs.cancel_run(alice, run)
        run = wait_for(run, lambda r: r.is_finished, seconds=60)
        assert not any(p.is_running() for p in launched)
    assert run.status == RunStatus.CANCELLED, (run.error, run.log)
    assert 2 <= run.step < 100_000 and not ModelCheckpoint.objects.filter(run=run).exists()


def kill_and_resume(settings, tmp_path, run: TrainingRun, pause) -> TrainingRun:
    """Start a worker, SIGKILL it while the run waits at ``pause`` (a checkpoint behind it, steps ahead),
    then start another whose sweep resumes it; the run once finished."""
    env = worker_env(settings, tmp_path) | FAST_LIVENESS
    with pause as paused, running_worker(env, queues="training") as worker:
        wait_for(run, lambda _: paused(), seconds=180)
        assert state_dir(run.pk).is_dir()
        launched = training_processes(worker)
        worker.kill()
        worker.wait(timeout=10)
    psutil.wait_procs(launched, timeout=10)
    assert not any(p.is_running() for p in launched)  # they died with the worker
    with running_worker(env, queues="training"):
        return wait_for(run, lambda r: r.is_finished, seconds=240)


def resumed_step(run: TrainingRun) -> int:
    line = next(line for line in run.log.splitlines() if "Continued from the checkpoint of step" in line)
    return int(line.rsplit(" ", 1)[1])


@pytest.mark.parametrize(("kind", "processes"), [(RunKind.BC, 2), (RunKind.RM, 1)])
def test_a_run_whose_worker_is_killed_continues_from_its_checkpoint_and_ends_as_if_never_stopped(
    kind, processes, settings, tmp_path, alice, tiny_llama_dir, tiny_bert_dir, broker_namespace
):
    base = tiny_llama_dir if kind == RunKind.BC else tiny_bert_dir
    batch = {"batch_size": 4 // processes, "processes": processes}
    steps = {"max_steps": 60, "checkpoint_every": 4, "eval_every": 6, "validation_fraction": 0.25}
    # Paused at its progress write of step 6 at the latest: a validation's figures are written at once
    # (the others once a second), so the kill comes after the checkpoint of step 4, whatever the speed.
    pause = paused_at_progress("training_trainingrun", "step", above=5)
    first = trainer_run(kind, alice, base, resume_attempts=1, **steps, **batch)
    run = kill_and_resume(settings, tmp_path, first, pause)
    assert run.status == RunStatus.DONE, (run.error, run.log)
    assert run.resumes == 1 and "queued again to continue from the checkpoint of step 4" in run.log
    assert resumed_step(run) == 4
    assert ModelCheckpoint.objects.filter(run=run).exists() and not state_dir(run.pk).exists()

    # The same run never stopped, on as many processes (they share the data out as the killed run did).
    alone = trainer_run(kind, alice, base, run.export, **steps, **batch)
    if processes == 1:
        alone = jobs.run_training_job(alone.pk)
    else:
        with running_worker(worker_env(settings, tmp_path), queues="training"):
            alone = wait_for(alone, lambda r: r.is_finished, seconds=180)
    assert losses(run).keys() == losses(alone).keys() == set(range(1, 61))
    for step, loss in losses(alone).items():  # the same states and data order: float rounding apart
        assert losses(run)[step] == pytest.approx(loss, rel=1e-4), step
    assert run.metrics["train_loss"] == pytest.approx(alone.metrics["train_loss"], rel=1e-4)
    assert run.metrics["eval_loss"] == pytest.approx(alone.metrics["eval_loss"], rel=1e-4)


def test_an_rl_run_on_two_processes_whose_worker_is_killed_continues_and_ends_as_if_never_stopped(
    settings, tmp_path, alice, tiny_bert_dir, tmp_path_factory, broker_namespace
):
    reward = model(RunKind.RM, "tiny-rm", str(tiny_reward_model(tmp_path / "rm", tiny_bert_dir, 0.25, 128)))
    start = model(RunKind.BC, "tiny-bc", str(seeded_tiny_llama(tmp_path_factory.mktemp("rl-start"))))
    for question in rl_questions(2):
        answered(question)
    common = {"steps": 6, "group_size": 2, "questions_per_step": 2, "max_answer_tokens": 6}
    common |= {"checkpoint_every": 2, "learning_rate": 1e-3}
    request = RLRequest(reward, start, settings=common | {"processes": 2, "resume_attempts": 1})
    # Paused as it stores step 3's episodes (every step's are, unthrottled): checkpoint 2 behind it.
    pause = paused_at("training_rlepisode", "INSERT", "NEW.step = 3")
    run = kill_and_resume(settings, tmp_path, request_rl_run(alice, request), pause)
    assert run.status == RunStatus.DONE, (run.error, run.log)
    assert run.resumes == 1 and resumed_step(run) == 2
    assert "Training in 2 processes" in run.log
    # Every step's episodes once: those the killed worker recorded after its checkpoint were taken back.
    assert sorted(set(RLEpisode.objects.filter(run=run).values_list("step", flat=True))) == list(range(1, 7))
    assert RLEpisode.objects.filter(run=run).count() == 6 * 2 * 2

    alone = request_rl_run(alice, RLRequest(reward, start, settings=common), queue=False)
    alone = jobs.run_training_job(alone.pk)
    for key in ("reward_mean", "kl", "loss", "entropy"):
        got, expected = [e[key] for e in run.timeline], [e[key] for e in alone.timeline]
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-6), key
