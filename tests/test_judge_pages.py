"""The judge pages: "Judge this batch" from the batch page, a judge run's page (progress, counts, each item's
two verdicts with the raw output, escaped), cancel; researchers only; and the judges' claim checks beside each
claim on the flag review page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models.judging import ClaimCheck, JudgeKind, JudgeRun, ModelJudgement
from tests.test_judge_jobs import endpoint_fixture, make_batch, submitted_with_claims  # noqa: F401 (a fixture)
from tests.test_sampling_endpoint import server  # noqa: F401 (the scripted server fixture)
from training.judging.jobs import run_judge_job
from training.judging.runs import DEFAULTS, JudgeRequest, request_judge_run
from training.models import ModelCheckpoint, RunKind, RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def reward_model() -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path="/nowhere"
    )


def form_data(judge: str, **changes) -> dict:
    data = {name: value for name, value in DEFAULTS.items() if not isinstance(value, bool)} | {"judge": judge}
    return data | changes


def test_the_batch_page_offers_judging_and_lists_its_runs(client_for, alice, reward_model):
    batch = make_batch(1)
    run = request_judge_run(alice, JudgeRequest(batch=batch, reward_model=reward_model), queue=False)
    html = client_for(alice).get(reverse("console:feedback_batch", args=[batch.pk])).content.decode()
    assert reverse("training:judge_new", args=[batch.pk]) in html
    assert reverse("training:judge_run", args=[run.pk]) in html and "tiny-rm" in html


def test_a_valid_request_queues_a_run_and_a_refusal_lands_on_its_field(
    client_for, alice, reward_model, endpoint
):
    batch = make_batch(2)
    client = client_for(alice)
    page = client.get(reverse("training:judge_new", args=[batch.pk])).content.decode()
    assert f'value="rm:{reward_model.pk}"' in page and 'value="endpoint:judge"' in page
    url = reverse("training:judge_new", args=[batch.pk])
    refused = client.post(url, form_data(f"rm:{reward_model.pk}", tie_margin=-1))
    assert refused.status_code == 400 and "Must be between 0 and 10." in refused.content.decode()
    refused = client.post(url, form_data(f"rm:{reward_model.pk}", check_claims="on"))
    assert refused.status_code == 400 and "A reward model cannot check claims" in refused.content.decode()
    assert client.post(url, form_data("rm:999999")).status_code == 400
    assert not JudgeRun.objects.exists()
    response = client.post(url, form_data("endpoint:judge", route="on", audit_share=0.25, tie_margin=-5))
    run = JudgeRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("training:judge_run", args=[run.pk])
    assert (run.judge_kind, run.endpoint, run.route, run.settings["audit_share"]) == (
        "endpoint",
        "judge",
        True,
        0.25,
    )
    assert "tie_margin" not in run.settings  # a reward model's setting, not sent for a language model


def test_the_run_page_shows_both_verdicts_with_the_raw_output_escaped(client_for, alice, endpoint):
    from tests.test_sampling_endpoint import chat_ok

    endpoint.script["/v1/chat/completions"] = [
        chat_ok('<script>alert(1)</script> {"ratings": {"overall": "equal"}}')
    ]
    batch = make_batch(1)
    run = run_judge_job(request_judge_run(alice, JudgeRequest(batch=batch, endpoint="judge"), queue=False).pk)
    html = client_for(alice).get(reverse("training:judge_run", args=[run.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Drawn order" in html and "Reversed order" in html and "Equally good" in html
    assert (
        "comparison-v1" in html
        and "1 of 1 items judged in both orders" in html
        and "Routing</dt><dd>off" in html
    )
    assert "Same verdict in both orders" in html
    assert (
        "[system]\nYou are a careful evaluator" in html
        and "[user]\nQuestion: Why is the sky blue? (0)" in html
    )
    ModelJudgement.objects.filter(run=run, swapped=True).update(
        response=None, error="the output holds no JSON"
    )
    html = client_for(alice).get(reverse("training:judge_run", args=[run.pk])).content.decode()
    assert "Unreadable: the output holds no JSON" in html


def test_the_htmx_partial_polls_while_running_and_cancel_stops_a_queued_run(client_for, alice, reward_model):
    run = request_judge_run(alice, JudgeRequest(batch=make_batch(3), reward_model=reward_model), queue=False)
    JudgeRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        items_done=1,
        estimated_end_at=timezone.now() + timedelta(minutes=2, seconds=5),
    )
    client = client_for(alice)
    partial = client.get(
        reverse("training:judge_run", args=[run.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<html" not in partial and 'hx-trigger="every 2s"' in partial
    assert "1 of 3 items judged" in partial and "about 3 min left" in partial
    url = reverse("training:judge_run", args=[run.pk])
    assert "HX-Refresh" not in client.get(url, HTTP_HX_REQUEST="true").headers
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.DONE)
    # The poll that sees the end reloads the page once, for the verdicts the page was loaded without.
    assert client.get(url, HTTP_HX_REQUEST="true").headers["HX-Refresh"] == "true"
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED)
    assert client.post(reverse("training:judge_cancel", args=[run.pk])).status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_only_researchers_see_judge_pages_and_state_changes_need_the_csrf_token(
    client_for, alice, bob, dana, charlie, reward_model
):
    batch = make_batch(1)
    run = request_judge_run(alice, JudgeRequest(batch=batch, reward_model=reward_model), queue=False)
    new, choice = reverse("training:judge_new", args=[batch.pk]), form_data(f"rm:{reward_model.pk}")
    for user in (bob, dana, charlie):
        client = client_for(user)
        assert client.get(new).status_code == 403 and client.post(new, choice).status_code == 403
        assert client.get(reverse("training:judge_run", args=[run.pk])).status_code == 404
        assert client.post(reverse("training:judge_cancel", args=[run.pk])).status_code == 404
    assert client_for(alice).get(reverse("training:judge_new", args=[batch.pk + 1])).status_code == 404
    anonymous = client_for(None).get(reverse("training:judge_run", args=[run.pk]))
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(reverse("training:judge_cancel", args=[run.pk])).status_code == 403
    assert strict.post(new, choice).status_code == 403
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and JudgeRun.objects.count() == 1
    page = client_for(alice).get(new).content.decode()
    assert "<script>" not in page and "csrfmiddlewaretoken" in page


def test_the_flag_review_page_shows_each_claims_checks_beside_it(client_for, alice, bob):
    batch = make_batch(1)
    task = submitted_with_claims(batch, bob)
    run = JudgeRun.objects.create(
        batch=batch, judge_kind=JudgeKind.ENDPOINT, endpoint="judge", judge_name="judge:smol"
    )
    ClaimCheck.objects.create(
        run=run, assignment=task, slot="A", claim=0, support="supported", raw_output="{}"
    )
    ClaimCheck.objects.create(run=run, assignment=task, slot="B", claim=0, error="the output holds <no> JSON")
    html = client_for(alice).get(reverse("console:feedback_flags", args=[batch.pk])).content.decode()
    first, second = html.split("Answer B</h3>")
    assert "“Rayleigh scattering”" in first and "judge:smol</a>" not in first
    link = f'<a href="{reverse("training:judge_run", args=[run.pk])}">{run.pk}</a>'
    assert f"Judge run {link} (judge:smol): supported" in first
    assert "unreadable (the output holds &lt;no&gt; JSON)" in second


def test_a_reward_model_judge_that_calls_nearly_everything_equal_is_warned_about(
    client_for, alice, reward_model
):
    run = request_judge_run(alice, JudgeRequest(batch=make_batch(5), reward_model=reward_model), queue=False)
    items = list(run.batch.items.order_by("id"))
    url = reverse("training:judge_run", args=[run.pk])

    def judged(gaps: list[float]) -> str:
        ModelJudgement.objects.filter(run=run).delete()
        for item, gap in zip(items, gaps, strict=True):
            first, second = item.answers.order_by("id").values_list("id", flat=True)
            for swapped in (False, True):
                scores = {str(first): 0.3 + gap, str(second): 0.3}
                ModelJudgement.objects.create(
                    run=run, item=item, swapped=swapped, order=[first, second], details={"scores": scores}
                )
        return " ".join(client_for(alice).get(url).content.decode().split())

    warning = "The reward model's scores of the two answers differ by no more than the tie margin"
    # The default margin 0.05: 8 of 10 judgements within it is under 90%, no warning.
    assert warning not in judged([0.01, 0.02, 0.02, 0.03, 0.5])
    html = judged([0.01, 0.02, 0.02, 0.03, 0.04])
    assert f"{warning} (0.05) on 10 of its 10 judgements (median difference 0.0200 preference logits)" in html
    assert warning not in judged([0.01, 0.02, 0.3, 0.4, 0.5])
