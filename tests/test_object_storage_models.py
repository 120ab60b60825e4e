"""Model checkpoints in object storage, against a real S3 API on 127.0.0.1 (tests/object_storage.py): a
training worker reads its export and its base model from the bucket and uploads the model it trained; a
sampling worker on another machine, its cache empty, downloads that policy and a reward model once and
samples with them; deleting a model deletes its objects; a worker killed mid-upload publishes nothing and
leaves no unfinished upload after the next sweep."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import time

import pytest

from annotation.models import Export, ExportFormat, ExportStatus
from core.jobs.heartbeat import WORKER_STOPPED
from core.storage import EXPORTS, MODELS, get_storage
from core.storage_cache import MANIFEST
from tests.conftest import running_worker
from tests.object_storage import StallingProxy
from tests.test_job_faults import FAST_LIVENESS
from tests.test_sampling_jobs import TINY, sample_on_a_worker, sampling_worker_env
from tests.test_sampling_jobs import questions as eval_questions
from tests.test_training import bc_rows
from tests.test_training_jobs import questions as bc_questions
from tests.test_training_jobs import wait_until_finished, worker_env
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, Sample
from training.models import RunStatus as Status
from training.runs.jobs import delete_checkpoint, request_run
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling


def stored_export(owner, export_format: str, rows: list[dict]) -> Export:
    """A finished export whose file is in the bucket with its sha256, as the export job leaves one."""
    export = Export.objects.create(owner=owner, export_format=export_format, status=ExportStatus.DONE)
    body = "".join(json.dumps(row) + "\n" for row in rows).encode()
    part = get_storage(EXPORTS).scratch_dir() / "upload.part"
    part.write_bytes(body)
    export.file_name = f"export-{export.pk}-{export_format}.jsonl"
    get_storage(EXPORTS).publish_file(export.file_name, part)
    export.sha256, export.row_count = hashlib.sha256(body).hexdigest(), len(rows)
    export.save()
    return export


def stored_model(kind: str, name: str, folder, tmp_path) -> ModelCheckpoint:
    """A model folder uploaded to the models storage and registered under ``name``."""
    copy = shutil.copytree(folder, tmp_path / "uploads" / name)
    location = get_storage(MODELS).publish_folder(name, copy)
    return ModelCheckpoint.objects.create(
        kind=kind, name=name, base_model="random", path=location, storage_name=name
    )


def cached_models(cache) -> list[str]:
    """The complete model copies in a machine's cache, by stored name (their folders end in a digest)."""
    folders = (cache / "models").iterdir() if (cache / "models").is_dir() else ()
    return sorted(f.name.rsplit("-", 1)[0] for f in folders if (f / MANIFEST).is_file())


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_models_go_from_the_training_worker_through_the_bucket_to_a_sampling_worker(
    settings,
    tmp_path,
    tmp_path_factory,
    alice,
    freshwiki,
    tiny_llama_dir,
    tiny_bert_dir,
    bucket,
    model_store,
    broker_namespace,
):
    ids = [q.pk for q in bc_questions(10, "bc")]
    export = stored_export(
        alice, ExportFormat.BC_PAIRS, [row | {"question_id": ids[row["question_id"]]} for row in bc_rows(10)]
    )
    base = stored_model(RunKind.BC, "tiny-bc", tiny_llama_dir, tmp_path)
    reward_dir = tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, offset=0.25, max_length=64)
    reward_model = stored_model(RunKind.RM, "tiny-rm", reward_dir, tmp_path)
    settings_ = {"max_steps": 4, "max_length": 64, "eval_every": 2, "validation_fraction": 0.2}
    run = request_run(alice, RunKind.BC, export, settings_, base_checkpoint=base)  # queued on commit

    trainer = tmp_path / "trainer"  # one machine: its own model store and cache
    env = worker_env(settings, tmp_path) | bucket.env
    env |= {"MODEL_STORE_DIR": str(trainer / "models"), "STORAGE_CACHE_DIR": str(trainer / "cache")}
    with running_worker(env, queues="training"):
        run = wait_until_finished(run.pk)
    assert run.status == Status.DONE, run.error
    trained = ModelCheckpoint.objects.get(run=run)
    name = f"run-{run.pk}"
    assert (trained.storage_name, trained.path) == (name, f"s3://{bucket.name}/webgpt/models/{name}")
    stored = bucket.keys(f"models/{name}/")
    assert {f"models/{name}/config.json", f"models/{name}/{MANIFEST}"} <= set(stored)
    assert not (trainer / "models" / "runs" / name).exists()  # uploaded, then removed from the worker
    assert [p.name for p in (trainer / "cache" / "exports").iterdir()] == [f"{export.sha256}.jsonl"]
    assert cached_models(trainer / "cache") == ["tiny-bc"]  # the base model, downloaded to train from

    eval_questions(1)
    request = SamplingRequest(
        policy=trained, reward_model=reward_model, questions=QuestionSet(dataset="demo"), settings=TINY
    )
    sampling = request_sampling(alice, request)
    sampler = tmp_path / "sampler"  # another machine, its cache empty
    env = sampling_worker_env(settings, tmp_path) | bucket.env
    env |= {"MODEL_STORE_DIR": str(sampler / "models"), "STORAGE_CACHE_DIR": str(sampler / "cache")}
    sampling = sample_on_a_worker(env, sampling.pk)
    assert sampling.status == Status.DONE, sampling.error
    assert Sample.objects.filter(run=sampling).count() == 2
    assert cached_models(sampler / "cache") == sorted([name, "tiny-rm"])

    delete_checkpoint(alice, trained)
    assert bucket.keys(f"models/{name}/") == [] and bucket.keys("models/tiny-rm/")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_training_worker_killed_mid_upload_publishes_nothing_and_the_next_sweep_aborts_the_upload(
    settings, tmp_path, alice, freshwiki, tiny_llama_dir, bucket, model_store, broker_namespace
):
    """SIGKILL while the model's weights (13 MB: a multipart upload) are going up: the run's row never says
    done, no model is registered, and the next worker's sweep fails the run, deletes the files that went up
    and aborts the unfinished upload (which S3 would otherwise keep, unreadable, until a lifecycle rule)."""
    ids = [q.pk for q in bc_questions(4, "bc")]
    export = stored_export(
        alice, ExportFormat.BC_PAIRS, [row | {"question_id": ids[row["question_id"]]} for row in bc_rows(4)]
    )
    base = stored_model(RunKind.BC, "tiny-bc", tiny_llama_dir, tmp_path)
    run = request_run(alice, RunKind.BC, export, {"max_steps": 1, "max_length": 64}, base_checkpoint=base)
    name = f"run-{run.pk}"

    def weights_part(method: str, target: str) -> bool:
        return method == "PUT" and f"/models/{name}/model.safetensors?" in target and "uploadId=" in target

    env = worker_env(settings, tmp_path) | bucket.env | FAST_LIVENESS
    with (
        StallingProxy(bucket.url, hold=weights_part) as network,
        running_worker(env | {"S3_ENDPOINT_URL": network.url}, queues="training") as worker,
    ):
        assert network.held.wait(timeout=180), "the weights' upload never started"
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    run.refresh_from_db()
    assert run.status == Status.RUNNING  # as the dead worker left it
    assert bucket.unfinished_uploads() == [f"webgpt/models/{name}/model.safetensors"]
    assert MANIFEST not in {key.rsplit("/", 1)[-1] for key in bucket.keys(f"models/{name}/")}

    with running_worker(env, queues="training"):
        run = wait_until_finished(run.pk, seconds=60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (bucket.unfinished_uploads() or bucket.keys(f"models/{name}/")):
            time.sleep(0.2)
    assert run.status == Status.FAILED and run.error.startswith(WORKER_STOPPED)
    assert not ModelCheckpoint.objects.filter(run=run).exists()
    assert bucket.unfinished_uploads() == [] and bucket.keys(f"models/{name}/") == []
    assert bucket.keys("models/tiny-bc/")  # the base model is untouched
