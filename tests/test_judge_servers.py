"""Judge runs against a real model server: ``transformers serve`` running a tiny random Llama in the converted
SmolLM2 layout (tests/servers.py), named in ``SAMPLING_ENDPOINTS`` with ``server: transformers``, through the
job (``run_judge_job``) and ``EndpointBackend``. The random model writes no verdict: every output it cannot
make into one is stored with its reason beside the raw text, and the run still finishes (and the server,
which refuses fields it does not know, was sent no JSON schema). The scripted fake
(test_judge_jobs.py) stays for what only a scripted judge shows (verdicts read and compared across the two
orders, routing, the prompts sent) and for the faults a real server does not produce."""

from __future__ import annotations

from typing import Any

import pytest

from annotation.models.judging import ClaimCheck, JudgeRun, ModelJudgement
from tests.servers import ServedModel
from tests.test_judge_jobs import make_batch, submitted_with_claims
from training.judging.jobs import run_judge_job
from training.judging.runs import JudgeRequest, request_judge_run
from training.models import RunStatus
from training.sampling.endpoints import EndpointConfig

pytestmark = [pytest.mark.worker, pytest.mark.django_db]  # one server per test process, on one xdist worker
SETTINGS = {"temperature": 0.8, "max_tokens": 16, "seed": 3}


@pytest.fixture(name="served")
def served_fixture(settings, transformers_server: ServedModel) -> ServedModel:
    settings.SAMPLING_ENDPOINTS = {
        "serve": EndpointConfig(
            "serve",
            transformers_server.base_url,
            transformers_server.model,
            server="transformers",
            timeout_s=60,
            max_retries=1,
        )
    }
    return transformers_server


def judge(user, batch, **changes: Any) -> JudgeRun:
    request = JudgeRequest(batch=batch, endpoint="serve", settings=SETTINGS | changes)
    return run_judge_job(request_judge_run(user, request, queue=False).pk)


def raw_outputs(run: JudgeRun) -> list[str]:
    return list(
        ModelJudgement.objects.filter(run=run)
        .order_by("item_id", "swapped")
        .values_list("raw_output", flat=True)
    )


def test_a_judge_run_on_transformers_serve_stores_both_orders_and_each_unreadable_output_with_its_reason(
    alice, served
):
    batch = make_batch(2)
    run = judge(alice, batch)

    assert run.status == RunStatus.DONE, run.error
    assert (run.judge_name, run.items_done, run.items_total) == (f"serve:{served.model}", 2, 2)
    rows = list(ModelJudgement.objects.filter(run=run).order_by("item_id", "swapped"))
    assert [(row.item_id, row.swapped) for row in rows] == [
        (item, swapped)
        for item in batch.items.order_by("id").values_list("pk", flat=True)
        for swapped in (0, 1)
    ]
    for row in rows:
        assert (
            row.raw_output.strip()
            and row.details["tokens"] == 16
            and row.details["finish_reason"] == "length"
        )
        assert row.details["constraint"] == "none"  # transformers serve takes no JSON schema
        assert (row.response is None) == bool(row.error)  # a verdict, or the reason there is none
    assert len({row.details["seed"] for row in rows}) == 4 and len(set(raw_outputs(run))) == 4
    unreadable = [row for row in rows if row.response is None]
    assert unreadable and all("JSON" in row.error for row in unreadable), [r.error for r in unreadable]
    # The counts add up to the rows stored.
    metrics = run.metrics
    assert metrics["judgements"] == 4 and metrics["unreadable"] == len(unreadable)
    readable_both = sum(
        drawn.response is not None and swapped.response is not None
        for drawn, swapped in zip(rows[::2], rows[1::2], strict=True)
    )
    assert metrics["judged"] == 2 and metrics["both_orders"] == readable_both
    assert metrics["consistent"] + metrics["flipped"] == metrics["both_orders"]
    assert f"2 item(s) judged: {len(unreadable)} unreadable output(s)" in run.log

    # The run's seed reproduces its outputs on the server; another seed draws others.
    assert raw_outputs(judge(alice, batch)) == raw_outputs(run)
    assert raw_outputs(judge(alice, batch, seed=4)) != raw_outputs(run)


def test_a_claim_check_run_on_transformers_serve_stores_one_check_per_claim(alice, bob, served):
    batch = make_batch(1)
    task = submitted_with_claims(batch, bob)  # a claim marked in each answer
    run = judge(alice, batch, check_claims=True)

    assert run.status == RunStatus.DONE, run.error
    checks = list(ClaimCheck.objects.filter(run=run).order_by("slot"))
    assert [(c.assignment_id, c.slot, c.claim) for c in checks] == [(task.pk, "A", 0), (task.pk, "B", 0)]
    for check in checks:
        assert check.raw_output.strip() and bool(check.support) != bool(check.error), check
    metrics = run.metrics
    levels = sum(metrics[f"claims_{level}"] for level in ("supported", "weakly", "unsupported"))
    assert metrics["claims_checked"] == 2 == metrics["claims_unreadable"] + levels
    assert metrics["claims_unreadable"] == sum(not check.support for check in checks)
