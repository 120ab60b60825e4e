"""The training pages: runs compared in a table and a chart, a new run from an export, a run's live progress,
cancel, and the model registry; who may see them; the SVG chart."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import ExportFormat
from core.plot import Series, line_chart, timeline_series
from tests.test_api import api
from tests.test_training_jobs import finished_export
from training.checkpoints import state_dir
from training.models import ModelCheckpoint, RunKind, RunStatus, TrainingRun

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media", "model_store")]

TIMELINE = [
    {"step": 1, "loss": 0.9},
    {"step": 2, "loss": 0.7},
    {"step": 2, "eval_loss": 0.66, "eval_accuracy": 0.6},
    {"step": 4, "loss": 0.5},
    {"step": 4, "eval_loss": 0.61, "eval_accuracy": 0.7},
]
RM_METRICS = {
    "train_loss": 0.55,
    "eval_loss": 0.61,
    "eval_accuracy": 0.7,
    "eval_accuracy_low": 0.52,
    "eval_accuracy_high": 0.84,
    "reward_offset": 0.25,
}


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def rm_pairs(owner):
    return finished_export(owner, ExportFormat.RM_PAIRS, [{"chosen": "a", "rejected": "b"}])


def finished_rm_run(owner, **fields) -> TrainingRun:
    values = {"kind": RunKind.RM, "preset": "fast", "status": RunStatus.DONE, "step": 4, "total_steps": 4}
    values |= {"timeline": TIMELINE, "metrics": RM_METRICS}
    values["config"] = {"base_model": "all-minilm-l6-v2", "learning_rate": 3e-5}
    return TrainingRun.objects.create(owner=owner, export=rm_pairs(owner), **values | fields)


def checkpoint_of(run: TrainingRun, path: str, kind: str = RunKind.RM) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=kind,
        name=f"{kind}-run-{run.pk}",
        base_model="all-minilm-l6-v2",
        path=path,
        metrics=run.metrics,
        run=run,
    )


def test_alice_sees_runs_with_their_final_metrics_and_the_registry(client_for, alice, tmp_path):
    run = finished_rm_run(alice)
    checkpoint_of(run, str(tmp_path / "models" / "runs" / f"run-{run.pk}"))
    page = client_for(alice).get(reverse("training:runs"))
    assert page.status_code == 200
    html = page.content.decode()
    assert f'name="run" value="{run.pk}"' in html
    assert "0.550" in html and "0.610" in html and "0.700" in html and "(0.520 to 0.840)" in html
    assert 'value="100"' in html  # the progress bar of a finished run
    registry = client_for(alice).get(reverse("training:models")).content.decode()
    assert f"rm-run-{run.pk}" in registry
    assert reverse("training:run", args=[run.pk]) in registry
    ModelCheckpoint.objects.bulk_create(
        ModelCheckpoint(kind=RunKind.RM, name=f"old-{n}", base_model="b", path=f"/x/{n}") for n in range(50)
    )
    first = client_for(alice).get(reverse("training:models")).content.decode()
    assert first.count('<tr id="model-') == 50 and "Page 1 of 2" in first
    second = client_for(alice).get(reverse("training:models") + "?page=2").content.decode()
    assert second.count('<tr id="model-') == 1


def test_the_lists_take_the_same_queries_for_three_runs_as_for_six(client_for, alice, tmp_path):
    client = client_for(alice)

    def queries() -> list[int]:
        counts = []
        for url in (reverse("training:runs"), reverse("training:models")):
            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            counts.append(len(captured))
        return counts

    for n in range(3):
        checkpoint_of(finished_rm_run(alice), str(tmp_path / f"m{n}"))
    # A first request renews the session (at most once a minute: core/sessions.py), which is no part
    # of the lists' queries.
    assert client.get(reverse("training:runs")).status_code == 200
    three = queries()
    for n in range(3, 6):
        checkpoint_of(finished_rm_run(alice), str(tmp_path / f"m{n}"))
    assert queries() == three


def test_the_list_pages_are_for_researchers_and_every_run_or_model_is_a_404_for_others(
    client_for, alice, bob, charlie, tmp_path
):
    run = finished_rm_run(alice)
    checkpoint = checkpoint_of(run, str(tmp_path / "models" / "x"))
    lists = [reverse("training:runs"), reverse("training:models"), reverse("training:new")]
    lists.append(reverse("training:compare") + f"?run={run.pk}")
    objects = [reverse("training:run", args=[run.pk]), reverse("training:delete_model", args=[checkpoint.pk])]
    for person in (bob, charlie):
        client = client_for(person)
        assert [client.get(url).status_code for url in lists] == [403] * len(lists)
        assert [client.get(url).status_code for url in objects] == [404] * len(objects)
        assert client.post(reverse("training:cancel", args=[run.pk])).status_code == 404
        assert client.post(reverse("training:delete_model", args=[checkpoint.pk])).status_code == 404
    assert client_for(None).get(lists[0]).url.startswith(reverse("login"))
    assert ModelCheckpoint.objects.exists()


def test_a_run_page_shows_its_progress_chart_metrics_log_and_model(client_for, alice, tmp_path):
    run = finished_rm_run(alice, log="12:00:01 60 rows from export\n")
    checkpoint_of(run, str(tmp_path / "models" / "m"))
    html = client_for(alice).get(reverse("training:run", args=[run.pk])).content.decode()
    assert '<progress max="100" value="100"' in html
    assert "<svg" in html and "<path" in html
    assert "(95% CI 0.5200 to 0.8400)" in html
    assert "reward_offset" in html and "60 rows from export" in html
    assert f"rm-run-{run.pk}" in html
    assert "style=" not in html and "<script>" not in html
    assert "Cancel run" not in html


def test_an_evaluation_shows_accuracy_with_its_interval_log_loss_and_calibration(client_for, alice):
    bins = [{"bin": [0.6, 0.7], "count": 8, "predicted": 0.64, "observed": 0.75}]
    metrics = {
        "accuracy": 0.75,
        "accuracy_ci95": [0.41, 0.93],
        "log_loss": 0.58,
        "pairs": 8,
        "calibration": bins,
    }
    run = finished_rm_run(alice, kind=RunKind.RM_EVAL, metrics=metrics, timeline=[])
    html = client_for(alice).get(reverse("training:run", args=[run.pk])).content.decode()
    assert "Log loss" in html and "0.5800" in html
    assert "0.7500 (95% CI 0.4100 to 0.9300)" in html
    assert '<td class="num">8</td><td class="num">0.640</td><td class="num">0.750</td>' in html
    listed = client_for(alice).get(reverse("training:runs")).content.decode()
    assert "(0.410 to 0.930)" in listed


def test_the_progress_fragment_polls_while_the_run_works_and_stops_once_it_has_finished(client_for, alice):
    run = finished_rm_run(alice, status=RunStatus.RUNNING, step=1, total_steps=4, metrics={})
    url = reverse("training:run", args=[run.pk])
    client = client_for(alice)
    fragment = client.get(url, headers={"HX-Request": "true"})
    assert fragment.headers["Vary"].count("HX-Request") == 1
    html = fragment.content.decode()
    assert html.lstrip().startswith('<section id="run-status"')
    assert f'hx-get="{url}" hx-trigger="every 2s"' in html
    assert '<progress max="100" value="25"' in html and "Cancel run" in html
    TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.DONE, step=4)
    html = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in html and "hx-get" not in html
    assert "Cancel run" not in html


def test_cancel_marks_a_queued_run_cancelled(client_for, alice):
    run = finished_rm_run(alice, status=RunStatus.QUEUED, step=0, total_steps=0, metrics={}, timeline=[])
    response = client_for(alice).post(reverse("training:cancel", args=[run.pk]))
    assert response.url == reverse("training:run", args=[run.pk])
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.cancel_requested


def test_the_form_preselects_the_export_of_a_train_link(client_for, alice):
    export = rm_pairs(alice)
    client = client_for(alice)
    export_page = client.get(reverse("console:export", args=[export.pk])).content.decode()
    link = f"{reverse('training:new')}?export={export.pk}"
    assert link in export_page
    html = client.get(link).content.decode()
    assert f'<option value="{export.pk}" selected>' in html
    assert '<option value="rm" selected>' in html
    for odd in ("²", "9" * 30, "-1", f"{export.pk}\x00"):  # "²".isdigit() is true, int("²") fails
        page = client.get(reverse("training:new"), {"export": odd})
        assert page.status_code == 200, odd
        assert f'<option value="{export.pk}" selected>' not in page.content.decode(), odd


def test_the_form_rejects_an_export_of_the_wrong_format_and_creates_nothing(client_for, alice):
    export = rm_pairs(alice)
    response = client_for(alice).post(reverse("training:new"), {"kind": "bc", "export": export.pk})
    assert response.status_code == 400
    assert response.context["form"].errors == {"export": ["A bc run needs a bc-pairs export, not rm-pairs."]}
    html = response.content.decode()
    assert 'role="alert"' in html and "A bc run needs a bc-pairs export, not rm-pairs." in html
    assert not TrainingRun.objects.exists()


def test_impossible_settings_are_shown_on_their_field(client_for, alice):
    export = rm_pairs(alice)
    data = {"kind": "rm", "export": export.pk, "preset": "fast", "max_length": 8}
    response = client_for(alice).post(reverse("training:new"), data)
    assert response.status_code == 400
    assert response.context["form"].errors == {
        "max_length": ["Must be at least 32 and at most 32768, not 8."]
    }
    assert not TrainingRun.objects.exists()


def test_an_evaluation_needs_a_reward_model_and_a_bc_model_needs_the_paper_preset(
    client_for, alice, tmp_path
):
    export = rm_pairs(alice)
    bc_model = checkpoint_of(finished_rm_run(alice, kind=RunKind.BC), str(tmp_path / "bc"), kind=RunKind.BC)
    client = client_for(alice)
    evaluation = client.post(reverse("training:new"), {"kind": "rm_eval", "export": export.pk})
    assert evaluation.context["form"].errors == {
        "base_checkpoint": ["An evaluation needs a reward model to evaluate."]
    }
    fast = {"kind": "rm", "export": export.pk, "preset": "fast", "base_checkpoint": bc_model.pk}
    refused = client.post(reverse("training:new"), fast)
    assert refused.context["form"].errors == {
        "preset": ["A BC model is a SmolLM2 policy: use the paper preset, whose settings fit it."]
    }
    assert TrainingRun.objects.filter(status=RunStatus.QUEUED).count() == 0
    started = client.post(reverse("training:new"), fast | {"preset": "paper"})
    run = TrainingRun.objects.get(status=RunStatus.QUEUED)
    assert started.url == reverse("training:run", args=[run.pk])
    assert (run.preset, run.base_checkpoint, run.config["base_model"]) == ("paper", bc_model, bc_model.path)


def test_a_valid_form_queues_a_run_with_the_settings_given(
    client_for, alice, django_capture_on_commit_callbacks
):
    export = rm_pairs(alice)
    data = {"kind": "rm", "export": export.pk, "preset": "fast", "max_steps": 20, "learning_rate": 1e-4}
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client_for(alice).post(reverse("training:new"), data)
    run = TrainingRun.objects.get(status=RunStatus.QUEUED)
    assert response.url == reverse("training:run", args=[run.pk])
    assert len(queued) == 1  # sent to the training queue once committed
    assert (run.kind, run.export, run.preset, run.owner) == ("rm", export, "fast", alice)
    assert run.config["max_steps"] == 20 and run.config["learning_rate"] == 1e-4
    assert run.config["max_length"] == 256  # blank: the preset's value


def test_compare_overlays_the_curves_of_the_selected_runs_and_lists_their_numbers(client_for, alice):
    first = finished_rm_run(alice)
    second = finished_rm_run(
        alice, metrics=RM_METRICS | {"eval_accuracy": 0.8}, config={"learning_rate": 1e-4}
    )
    evaluation = finished_rm_run(
        alice, kind=RunKind.RM_EVAL, timeline=[], metrics={"accuracy": 0.9, "accuracy_ci95": [0.6, 0.98]}
    )
    url = reverse("training:compare") + f"?run={first.pk}&run={second.pk}&run={evaluation.pk}"
    html = client_for(alice).get(url).content.decode()
    assert html.count("<path") == 6  # three curves per training run, none for the evaluation
    assert f"#{first.pk} training loss" in html and f"#{second.pk} validation accuracy" in html
    assert "0.0001" in html and "3e-05" in html and "0.8" in html and "0.6 to 0.98" in html


def test_compare_needs_runs_alice_can_see(client_for, alice):
    response = client_for(alice).get(reverse("training:compare") + "?run=999")
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()
    assert client_for(alice).get(reverse("training:compare")).status_code == 400


def test_deleting_a_model_asks_first_then_removes_the_row_and_its_folder(client_for, alice, model_store):
    folder = model_store / "runs" / "run-1"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    checkpoint = checkpoint_of(finished_rm_run(alice), str(folder))
    url = reverse("training:delete_model", args=[checkpoint.pk])
    client = client_for(alice)
    assert "Delete model and folder" in client.get(url).content.decode()
    assert folder.exists()
    assert client.post(url).url == reverse("training:models")
    assert not ModelCheckpoint.objects.exists() and not folder.exists()


def test_a_model_a_queued_run_starts_from_is_not_deleted(client_for, alice, model_store):
    folder = model_store / "m"
    folder.mkdir(parents=True)
    checkpoint = checkpoint_of(finished_rm_run(alice), str(folder))
    finished_rm_run(alice, status=RunStatus.QUEUED, base_checkpoint=checkpoint)
    response = client_for(alice).post(reverse("training:delete_model", args=[checkpoint.pk]))
    assert response.status_code == 409 and "nothing deleted" in response.content.decode()
    assert ModelCheckpoint.objects.exists() and folder.exists()


def test_a_model_outside_the_store_keeps_its_folder(client_for, alice, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    checkpoint = checkpoint_of(finished_rm_run(alice), str(outside))
    response = client_for(alice).post(reverse("training:delete_model", args=[checkpoint.pk]))
    assert response.url == reverse("training:models")
    assert not ModelCheckpoint.objects.exists() and outside.exists()


def test_the_chart_draws_a_path_per_curve_and_escapes_its_labels():
    svg = line_chart(timeline_series(TIMELINE, prefix="<script>alert(1)</script> "), 'Run "1" & <b>')
    assert svg.startswith('<svg class="chart"') and svg.count("<path") == 3
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt; training loss" in svg
    assert 'aria-label="Run &quot;1&quot; &amp; &lt;b&gt;"' in svg
    assert "style" not in svg


def test_the_chart_is_empty_without_points_and_thins_long_timelines():
    assert line_chart(timeline_series([{"step": 1, "learning_rate": 1e-4}]), "nothing") == ""
    long = [(float(step), 1 / step) for step in range(1, 10_001)]
    svg = line_chart([Series("loss", long)], "long run")
    path = svg.split(' d="', 1)[1].split('"', 1)[0]
    assert path.count("L") <= 401
    assert path.rsplit(" ", 1)[1].startswith("L660.0,")  # the newest point is kept
    assert "nan" not in line_chart(timeline_series([{"step": 1, "loss": float("nan")}]), "x")


def test_runs_and_models_are_listed_read_only_in_the_admin(client_for, django_user_model, alice, tmp_path):
    run = finished_rm_run(alice)
    checkpoint = checkpoint_of(run, str(tmp_path / "m"))
    admin = django_user_model.objects.create_superuser("root", password="root-pw")
    client = client_for(admin)
    for name, pk in (("trainingrun", run.pk), ("modelcheckpoint", checkpoint.pk)):
        assert client.get(reverse(f"admin:training_{name}_changelist")).status_code == 200
        page = client.get(reverse(f"admin:training_{name}_change", args=[pk]))
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode()


@pytest.mark.django_db
def test_a_models_folder_is_shown_relative_to_the_model_store(settings, tmp_path):
    settings.MODEL_STORE_DIR = tmp_path / "store"
    inside = ModelCheckpoint(kind="rm", name="a", base_model="x", path=str(tmp_path / "store" / "rm-run-3"))
    outside = ModelCheckpoint(kind="rm", name="b", base_model="x", path="/opt/models/mine")
    assert (inside.store_path, outside.store_path) == ("rm-run-3", "/opt/models/mine")


def test_a_run_page_names_its_starting_model_and_says_no_step_cap_in_words(client_for, alice, tmp_path):
    """The config holds the folder the worker read (a server path) and -1 for "no cap": neither is shown."""
    first = finished_rm_run(alice)
    start = checkpoint_of(first, str(tmp_path / "store" / "runs" / "run-1"))
    folder = start.path
    run = finished_rm_run(alice, base_checkpoint=start, config={"base_model": folder, "max_steps": -1})
    html = client_for(alice).get(reverse("training:run", args=[run.pk])).content.decode()
    assert f"{start.name} (registered model)" in html and folder not in html
    assert "no cap (the epochs decide)" in html and ">-1<" not in html


def test_the_form_says_how_to_leave_the_step_cap_off_without_the_sentinel(client_for, alice):
    form = client_for(alice).get(reverse("training:new")).context["form"]
    help_text = form.fields["max_steps"].help_text
    assert "empty: train the epochs" in help_text and "-1" not in help_text and "no cap" in help_text
    assert form.fields["max_steps"].widget.attrs["min"] == 1


def test_a_failed_run_with_a_checkpoint_is_resumed_from_its_page_or_the_api(client_for, alice, bob):
    export = finished_export(alice, ExportFormat.RM_PAIRS, [])
    run = TrainingRun.objects.create(kind="rm", export=export, owner=alice, status=RunStatus.FAILED)
    TrainingRun.objects.filter(pk=run.pk).update(error="ValueError: out of memory")
    page = reverse("training:run", args=[run.pk])
    assert b"Resume from step" not in client_for(alice).get(page).content  # no checkpoint to continue from
    (state_dir(run.pk) / "checkpoint-6").mkdir(parents=True)
    (state_dir(run.pk) / "checkpoint-12").mkdir()
    assert client_for(bob).post(reverse("training:resume", args=[run.pk])).status_code == 404
    client = client_for(alice)
    assert b"Resume from step 12" in client.get(page).content
    response = client.post(reverse("training:resume", args=[run.pk]), follow=True)
    assert b"continues from its checkpoint of step 12" in response.content
    run.refresh_from_db()
    assert (run.status, run.resumes, run.error) == (RunStatus.QUEUED, 1, "")
    assert "Resume asked for: queued again to continue from the checkpoint of step 12" in run.log

    # Queued now: a second resume is refused in words, over the page and the API.
    again = client.post(reverse("training:resume", args=[run.pk]), follow=True)
    assert b"only a failed run with a checkpoint can continue" in again.content
    refused = api(alice).post(f"/api/training-runs/{run.pk}/resume")
    assert refused.status_code == 409 and refused.json() == {
        "detail": "only a failed run with a checkpoint can continue"
    }
    TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    accepted = api(alice).post(f"/api/training-runs/{run.pk}/resume")
    assert accepted.status_code == 202 and accepted.json()["resumes"] == 2
