"""One rule for every API body: a key the endpoint does not know is refused under its own name, with the
keys it takes, and nothing is written (a misspelt option used to be dropped and the default used)."""

from __future__ import annotations

import pytest

from annotation.models import Assignment, Export, FeedbackBatch, QuestionImport
from tests.test_api import api, batches  # noqa: F401 (a fixture)
from training.models import Round, TrainingRun

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    "/api/questions/import": QuestionImport,
    "/api/batches": FeedbackBatch,
    "/api/exports": Export,
    "/api/training-runs": TrainingRun,
    "/api/rounds": Round,
}


@pytest.mark.parametrize("url", ENDPOINTS)
def test_a_misspelt_key_is_refused_by_name_and_nothing_is_made(alice, url):
    before = ENDPOINTS[url].objects.count()
    body_format = "multipart" if url.endswith("/import") else "json"  # a file upload
    refused = api(alice).post(url, {"nmae": "x", "overlapp": 2}, format=body_format)
    assert refused.status_code == 400
    errors = refused.json()
    assert set(errors) == {"nmae", "overlapp"} and errors["nmae"][0].startswith("unknown; expected ")
    assert ENDPOINTS[url].objects.count() == before


@pytest.mark.parametrize("action", ["submit", "draft", "skip"])
def test_a_task_body_with_an_unknown_key_is_refused_and_the_task_is_unchanged(batches, bob, action):  # noqa: F811
    task = api(bob).post("/api/tasks/next").json()
    refused = api(bob).post(f"/api/tasks/{task['id']}/{action}", {"resposne": {}}, format="json")
    assert refused.status_code == 400 and "resposne" in refused.json()
    assert Assignment.objects.get(pk=task["id"]).status == task["status"]
