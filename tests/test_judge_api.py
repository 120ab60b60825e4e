"""Judge runs over the API and the ``judge_batch`` command: one check of every input (refusals by field,
nothing created, never a 500), researchers only (an outsider's run is a 404), cancel, the judgements."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models.judging import ClaimCheck, JudgeKind, JudgeRun, ModelJudgement
from tests.test_judge_jobs import (  # noqa: F401 (a fixture)
    endpoint_fixture,
    make_batch,
    submitted_with_claims,
)
from tests.test_sampling_endpoint import server  # noqa: F401 (the scripted server fixture)
from training.errors import RunError
from training.judging.runs import JudgeRequest, check_settings, request_judge_run
from training.models import ModelCheckpoint, RunKind, RunStatus
from training.sampling.endpoints import EndpointConfig

pytestmark = pytest.mark.django_db
RUNS = "/api/judge-runs"
ONE_JUDGE = "choose one judge: a registered reward model or an endpoint"
SEED_RANGE = f"must be between 0 and {2**31 - 1}"


def api(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def reward_model() -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(kind=RunKind.RM, name="rm", base_model="random", path="/nowhere")


@pytest.mark.parametrize(
    ("given", "field", "reason"),
    [
        ({"tie_margin": -0.1}, "tie_margin", "between 0 and 10"),
        ({"temperature": float("nan")}, "temperature", "between"),
        ({"seed": float("inf")}, "seed", "between"),
        ({"max_tokens": 12.5}, "max_tokens", "between 16"),
        ({"limit": 2.5}, "limit", "whole number"),
        ({"limit": "3"}, "limit", "expected a number"),
        ({"route": "yes"}, "route", "true or false"),
        ({"audit_share": 1.5}, "audit_share", "between 0 and 1"),
        ({"tie_margin": 0.5, "much_margin": 0.2}, "much_margin", "at least the tie margin"),
        ({"temprature": 1}, "settings", "unknown setting(s): temprature"),
    ],
)
def test_every_setting_is_checked_with_the_reason_named(given, field, reason):
    with pytest.raises(RunError) as refused:
        check_settings(given)
    assert refused.value.field == field and reason in refused.value.reason


def test_the_defaults_and_routing_settings_are_stored_with_the_run(alice, reward_model):
    batch = make_batch(3)
    settings = {"route": True, "confidence_threshold": 0.9, "audit_share": 0.2, "limit": 2}
    run = request_judge_run(
        alice, JudgeRequest(batch=batch, reward_model=reward_model, settings=settings), queue=False
    )
    assert run.route and run.items_total == 2 and run.status == RunStatus.QUEUED
    assert run.settings == {
        "tie_margin": 0.05, "much_margin": 1.0, "seed": 0, "limit": 2,
        "confidence_threshold": 0.9, "audit_share": 0.2,
    }  # fmt: skip


def test_a_researcher_asks_for_a_run_and_reads_it_back(alice, reward_model):
    batch = make_batch(2)
    body = {
        "batch": batch.pk,
        "reward_model": reward_model.pk,
        "settings": {"tie_margin": 0.2, "route": True},
    }
    response = api(alice).post(RUNS, body, format="json")
    assert response.status_code == 202, response.json()
    run = response.json()
    assert (run["judge_name"], run["judge_kind"], run["route"], run["items_total"]) == (
        "rm",
        "reward_model",
        True,
        2,
    )
    assert api(alice).get(f"{RUNS}/{run['id']}").json()["settings"]["tie_margin"] == 0.2
    assert [found["id"] for found in api(alice).get(RUNS, {"batch": batch.pk}).json()["results"]] == [
        run["id"]
    ]
    assert api(alice).get(RUNS, {"batch": batch.pk + 1}).json()["results"] == []


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"reward_model": "MODEL", "endpoint": "judge"}, {"non_field_errors": [ONE_JUDGE]}),
        ({}, {"non_field_errors": [ONE_JUDGE]}),
        ({"endpoint": "elsewhere"}, {"endpoint": ["unknown endpoint; expected one of: judge, bc"]}),
        ({"endpoint": "bc"}, "policy prompted"),
        ({"endpoint": "judge", "settings": {"tie_margin": 0.3}}, "only for a reward model's judging"),
        ({"reward_model": "MODEL", "settings": {"check_claims": True}}, "a reward model cannot check claims"),
        ({"reward_model": "MODEL", "settings": {"temperature": 0.5}}, "only for a language model"),
        ({"reward_model": "MODEL", "settings": {"seed": -1}}, {"settings": {"seed": [SEED_RANGE]}}),
        ({"reward_model": "MODEL", "settings": "fast"}, {"settings": []}),
        ({"reward_model": "MODEL", "settings": {"temprature": 1}}, "unknown setting(s): temprature"),
        ({"reward_model": 999999}, {"reward_model": ["no such model"]}),
        ({"reward_model": "MODEL", "batch": 999999}, {"batch": ["no such feedback batch"]}),
        ({"reward_model": "MODEL", "batch": "x"}, {"batch": []}),
        ({"reward_model": "MODEL", "url": "http://evil"}, {"url": []}),
    ],
)  # fmt: skip
def test_bad_requests_are_refused_by_field_and_create_nothing(alice, reward_model, settings, body, error):
    settings.SAMPLING_ENDPOINTS = {
        "judge": EndpointConfig("judge", "http://127.0.0.1:9/v1", "smollm2"),
        "bc": EndpointConfig("bc", "http://127.0.0.1:9/v1", "bc-model", policy="bc"),
    }
    batch = make_batch(1)
    body = {"batch": batch.pk} | {k: (reward_model.pk if v == "MODEL" else v) for k, v in body.items()}
    response = api(alice).post(RUNS, body, format="json")
    assert response.status_code == 400, response.content
    found = response.json()
    if isinstance(error, str):
        assert error in str(found)
    else:
        assert set(found) == set(error)
        for key, value in error.items():
            if value:
                assert found[key] == value
    assert not JudgeRun.objects.exists()


def test_a_reward_model_cannot_judge_a_rating_batch_nor_check_claims_of_a_minimal_comparison(
    alice, reward_model, endpoint
):
    rating = make_batch(1, "rating", preset="truthfulqa")
    refused = api(alice).post(RUNS, {"batch": rating.pk, "reward_model": reward_model.pk}, format="json")
    assert "cannot judge a rating batch" in refused.json()["reward_model"][0]
    minimal = make_batch(1, "minimal_comparison")
    refused = api(alice).post(
        RUNS, {"batch": minimal.pk, "endpoint": "judge", "settings": {"check_claims": True}}, format="json"
    )
    assert refused.json() == {
        "settings": {"check_claims": ["claims are annotated only in WebGPT comparisons"]}
    }
    assert api(alice).post(RUNS, {"batch": rating.pk, "endpoint": "judge"}, format="json").status_code == 202


def test_only_researchers_see_judge_runs_an_outsider_gets_404(alice, bob, charlie, reward_model):
    run = request_judge_run(alice, JudgeRequest(batch=make_batch(1), reward_model=reward_model), queue=False)
    for outsider in (bob, charlie):
        client = api(outsider)
        assert client.get(RUNS).status_code == 403
        assert (
            client.post(
                RUNS, {"batch": run.batch_id, "reward_model": reward_model.pk}, format="json"
            ).status_code
            == 403
        )
        for path in (f"{RUNS}/{run.pk}", f"{RUNS}/{run.pk}/judgements"):
            assert client.get(path).status_code == 404
        assert client.post(f"{RUNS}/{run.pk}/cancel").status_code == 404
    assert api(None).get(f"{RUNS}/{run.pk}").status_code in (401, 403)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and JudgeRun.objects.count() == 1


def test_cancel_and_the_judgements_over_the_api(alice, endpoint):
    batch = make_batch(2)
    run = request_judge_run(alice, JudgeRequest(batch=batch, endpoint="judge"), queue=False)
    from training.judging.jobs import run_judge_job

    run_judge_job(run.pk)
    rows = api(alice).get(f"{RUNS}/{run.pk}/judgements").json()["results"]
    assert [(row["item"], row["swapped"]) for row in rows] == [
        (i, s) for i in sorted(batch.items.values_list("pk", flat=True)) for s in (False, True)
    ]
    assert rows[0]["raw_output"] and rows[0]["response"]["ratings"]["overall"] in ("a_better", "b_better")
    queued = request_judge_run(alice, JudgeRequest(batch=batch, endpoint="judge"), queue=False)
    response = api(alice).post(f"{RUNS}/{queued.pk}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "cancelled"


def test_the_command_judges_a_batch_here_and_refuses_bad_options(alice, endpoint):
    batch = make_batch(2)
    out = StringIO()
    call_command("judge_batch", "--batch", str(batch.pk), "--endpoint", "judge", "--seed", "3", stdout=out)
    run = JudgeRun.objects.get()
    assert run.status == RunStatus.DONE and run.owner is None and run.settings["seed"] == 3
    assert "2 item(s)" in out.getvalue() and ModelJudgement.objects.filter(run=run).count() == 4
    with pytest.raises(CommandError, match="--temperature: must be between 0 and 2"):
        call_command("judge_batch", "--batch", str(batch.pk), "--endpoint", "judge", "--temperature", "3")
    with pytest.raises(CommandError, match="--batch: feedback batch 999999 does not exist"):
        call_command("judge_batch", "--batch", "999999", "--endpoint", "judge")
    queued = StringIO()
    call_command("judge_batch", "--batch", str(batch.pk), "--endpoint", "judge", "--queue", stdout=queued)
    assert reverse("training:judge_run", args=[JudgeRun.objects.latest("pk").pk]) in queued.getvalue()


def test_the_flag_review_api_gives_each_claims_checks_as_the_page_shows_them(alice, bob):
    batch = make_batch(1)
    task = submitted_with_claims(batch, bob)
    first, second = (
        JudgeRun.objects.create(batch=batch, judge_kind=JudgeKind.ENDPOINT, endpoint="judge", judge_name=name)
        for name in ("judge:smol", "judge:big")
    )
    ClaimCheck.objects.create(run=second, assignment=task, slot="A", claim=0, support="weakly")
    ClaimCheck.objects.create(run=first, assignment=task, slot="A", claim=0, support="supported")
    ClaimCheck.objects.create(run=first, assignment=task, slot="B", claim=0, error="the output holds no JSON")
    listed = api(alice).get(f"/api/batches/{batch.pk}/flags").json()["results"]
    expected = [
        {
            "slot": "A",
            "claim": 0,
            "run": first.pk,
            "judge": "judge:smol",
            "support": "supported",
            "error": "",
        },
        {"slot": "A", "claim": 0, "run": second.pk, "judge": "judge:big", "support": "weakly", "error": ""},
        {
            "slot": "B",
            "claim": 0,
            "run": first.pk,
            "judge": "judge:smol",
            "support": "",
            "error": "the output holds no JSON",
        },
    ]
    assert [row["id"] for row in listed] == [task.pk] and listed[0]["claim_checks"] == expected
    # Each check names its claim in the stored response: slot A's first claim is the span checked.
    assert listed[0]["response"]["answers"]["A"]["claims"][0]["end"] == 19
    decided = api(alice).post(
        f"/api/assignments/{task.pk}/flag-decision", {"decision": "keep"}, format="json"
    )
    assert decided.status_code == 200 and decided.json()["claim_checks"] == expected
