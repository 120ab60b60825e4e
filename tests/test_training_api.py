"""Training runs and models over the API: researchers only, 404 for everyone else's objects, JSON errors
by field, never a 5xx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from annotation.models import Export
from tests.test_api import api
from tests.test_training_jobs import rm_export
from training.checkpoints import store_dir
from training.models import ModelCheckpoint, RunKind, TrainingRun
from training.models import RunStatus as Status
from training.runs import jobs

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media", "model_store")]


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def test_a_researcher_starts_watches_and_cancels_a_run(alice):
    export = rm_export(alice, 4)
    body = {"kind": "rm", "export": export.pk, "preset": "fast", "settings": {"max_steps": 3}}
    response = api(alice).post("/api/training-runs", body, format="json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "queued" and run["config"]["max_steps"] == 3 and run["config"]["base_model"]
    assert api(alice).get(f"/api/training-runs/{run['id']}").json()["kind"] == "rm"
    cancelled = api(alice).post(f"/api/training-runs/{run['id']}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"


def test_errors_come_back_by_field_and_create_nothing(alice):
    export = rm_export(alice, 2)
    cases = [
        ({"kind": "bc", "export": export.pk}, {"export": ["a bc run needs a bc-pairs export, not rm-pairs"]}),
        ({"kind": "rm", "export": 999999}, {"export": ["no such export"]}),
        (
            {"kind": "rm", "export": export.pk, "settings": {"learning_rate": 7}},
            {"settings": {"learning_rate": ["must be more than 0 and less than 1, not 7.0"]}},
        ),
        (
            {"kind": "rm", "export": export.pk, "settings": {"max_steps": "10"}},
            {"settings": {"max_steps": ["expected int, got '10'"]}},
        ),
        (
            {"kind": "rm", "export": export.pk, "settings": {"nope": 1}},
            {"settings": ["unknown setting(s): nope"]},
        ),
        ({"kind": "rm", "export": export.pk, "base_checkpoint": 5}, {"base_checkpoint": ["no such model"]}),
        (
            {"kind": "rm", "export": 10**30},
            {"export": ["Ensure this value is less than or equal to 9223372036854775807."]},
        ),
        ({"kind": "dance", "export": export.pk}, {"kind": ['"dance" is not a valid choice.']}),
    ]
    for body, errors in cases:
        response = api(alice).post("/api/training-runs", body, format="json")
        assert response.status_code == 400, body
        assert response.json() == errors
    assert not TrainingRun.objects.exists()


def test_settings_out_of_range_or_naming_a_path_are_refused_and_nothing_is_stored(alice, tiny_bert_dir):
    """The review's probes (threads=10**9, max_length=10**12, base_model=/etc were queued), and paths a
    request might slip into the run's config."""
    export = rm_export(alice, 2)
    probes = {
        "threads": 10**9,
        "max_length": 10**12,
        "base_model": "/etc",
        "batch_size": 10**6,
        "learning_rate": 1e300,
    }
    for name, value in probes.items():
        body = {"kind": "rm", "export": export.pk, "preset": "fast", "settings": {name: value}}
        response = api(alice).post("/api/training-runs", body, format="json")
        assert response.status_code == 400 and list(response.json()["settings"]) == [name], response.json()
    model = ModelCheckpoint.objects.create(kind="rm", name="tiny", base_model="b", path=str(tiny_bert_dir))
    for settings_ in (
        {"base_model": str(tiny_bert_dir)},
        {"data": "/etc/passwd"},
        {"output_dir": "/srv/models/x"},
    ):
        body = {"kind": "rm", "export": export.pk, "preset": "fast", "settings": settings_}
        assert api(alice).post("/api/training-runs", body, format="json").status_code == 400, settings_
    assert not TrainingRun.objects.exists()
    # A registered model is named by its id; its folder comes from the registry.
    body = {"kind": "rm", "export": export.pk, "preset": "fast", "base_checkpoint": model.pk}
    run = api(alice).post("/api/training-runs", body, format="json").json()
    assert run["base_checkpoint"] == model.pk and run["config"]["base_model"] == str(tiny_bert_dir)


def test_others_get_404_on_details_and_403_on_lists(alice, bob, charlie, dana):
    export = rm_export(alice, 2)
    run = jobs.request_run(alice, RunKind.RM, export, {}, "fast", queue=False)
    folder = Path(store_dir()) / "runs" / "x"
    folder.mkdir(parents=True)
    model = ModelCheckpoint.objects.create(kind="rm", name="m", base_model="b", path=str(folder), run=run)
    details = [f"/api/training-runs/{run.pk}", f"/api/models/{model.pk}"]
    for user in (bob, charlie, dana):
        for url in details:
            assert api(user).get(url).status_code == 404, url
        assert api(user).post(f"/api/training-runs/{run.pk}/cancel").status_code == 404
        assert api(user).delete(f"/api/models/{model.pk}").status_code == 404
        for url in ("/api/training-runs", "/api/models"):
            assert api(user).get(url).status_code == 403, url
    assert api().get(details[0]).status_code == 401
    assert TrainingRun.objects.get().status == Status.QUEUED and folder.exists()
    listed = api(alice).get("/api/models").json()["results"]
    assert [(m["id"], m["path"]) for m in listed] == [(model.pk, "runs/x")]  # never the server's own path
    assert api(alice).get(details[1]).json()["path"] == "runs/x"
    # While a queued run starts from the model, its folder stays.
    user = jobs.request_run(alice, RunKind.RM, export, {}, "fast", model, queue=False)
    refused = api(alice).delete(f"/api/models/{model.pk}")
    assert refused.status_code == 409 and "in use" in refused.json()["detail"] and folder.exists()
    jobs.cancel_run(alice, user)
    assert api(alice).delete(f"/api/models/{model.pk}").status_code == 204
    assert not folder.exists() and not ModelCheckpoint.objects.exists()


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
REAL_EXPORT = -1  # stands for the id of an rm-pairs export that exists
NUMBERS = ("max_steps", "max_length", "batch_size", "threads", "seed", "learning_rate", "epochs")
BODIES = (
    JSON
    | st.fixed_dictionaries(
        {"kind": st.sampled_from(["bc", "rm", "rm_eval", "x"]), "export": st.integers(), "settings": JSON},
        optional={"preset": JSON, "base_checkpoint": JSON},
    )
    # Near misses: a real export, a reward-model run, numbers on either side of their ranges.
    | st.fixed_dictionaries(
        {
            "kind": st.just("rm"),
            "export": st.just(REAL_EXPORT),
            "preset": st.just("fast"),
            "settings": st.dictionaries(
                st.sampled_from(NUMBERS), st.integers(-2, 10**6) | st.floats(-1, 1e4), max_size=2
            ),
        }
    )
)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES)
def test_no_body_gets_a_5xx_and_a_refused_one_writes_nothing(alice, body):
    export = Export.objects.filter(owner=alice).first() or rm_export(alice, 2)
    if isinstance(body, dict) and body.get("export") == REAL_EXPORT:
        body["export"] = export.pk
    before = TrainingRun.objects.count()
    response = api(alice).post("/api/training-runs", body, format="json")
    event(f"status {response.status_code}")
    if response.status_code == 202:
        run = TrainingRun.objects.get(pk=response.json()["id"])
        assert (run.kind, run.export) == (body["kind"], export)
        assert TrainingRun.objects.count() == before + 1
    else:
        assert response.status_code == 400, (body, response.content)
        assert TrainingRun.objects.count() == before


@pytest.mark.django_db(databases=[])
def test_the_web_process_does_not_load_the_ml_stack():
    """Pages and API import training's Django side only; torch and transformers load in workers."""
    code = (
        "import django, sys; django.setup(); from django.urls import resolve; resolve('/api/models'); "
        "import training.runs.views, training.runs.forms, training.runs.api; "
        "from training.runs.config import default_rm_preset; default_rm_preset(); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    env = {"DEBUG": "1", "PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "webgpt_site.settings"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=root
    )
    assert done.stdout.strip() == "[]", done.stderr
