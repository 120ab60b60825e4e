"""The judge job: a language model behind an endpoint (through ``EndpointBackend``, against the scripted
OpenAI-compatible server of the endpoint tests: a judge whose verdicts are known) and a tiny random reward
model judge a batch's items in both orders; the JSON schema each kind of server is sent; cancel, failure and
resuming keep whole items; claim checks; and a run on a real worker of the sampling queue. Unreadable
outputs stored with their reason, and runs against a real server: test_judge_servers.py."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    Question,
    SourceKind,
)
from annotation.models.judging import ClaimCheck, JudgeRun, ModelJudgement, Routing
from tests.conftest import running_worker
from tests.test_sampling_endpoint import chat_ok, server  # noqa: F401 (the scripted server fixture)
from tests.test_training_jobs import worker_env
from tests.tiny_models import tiny_reward_model
from training.judging.claims import SUPPORT_SCHEMA
from training.judging.jobs import drawn_order, run_judge_job
from training.judging.runs import JudgeRequest, cancel_judge_run, request_judge_run
from training.models import ModelCheckpoint, RunKind, RunStatus
from training.sampling.dialects import request_fields
from training.sampling.endpoints import EndpointConfig
from training.sampling.types import CompletionRequest, Constraint, JsonSchema

pytestmark = pytest.mark.django_db
CHAT = "/v1/chat/completions"
SKY = {"title": "Sky", "url": "https://e.org/sky", "domain": "e.org", "extract": "Blue light scatters more."}
SEA = {"title": "Sea", "url": "https://f.org/sea", "domain": "f.org", "extract": "The sea is blue."}
GOOD, POOR = "Rayleigh scattering makes the sky blue [1].", "The sky reflects the sea [1]."


def make_batch(items: int, template: str = "webgpt_comparison", **config: Any) -> FeedbackBatch:
    """``items`` comparisons of a well-supported answer and a poor one (or rankings of four answers)."""
    groups = []
    batch_number = FeedbackBatch.objects.count()
    for n in range(items):
        key = f"sky-{batch_number}-{n}"
        question = Question.objects.create(text=f"Why is the sky blue? ({n})", key=key, dataset="demo")
        texts = {"ranking": [GOOD, POOR, "Blue paint.", "No idea."], "rating": [GOOD]}.get(
            template, [GOOD, POOR]
        )
        groups.append(
            [
                Answer.objects.create(
                    question=question,
                    text=text,
                    source_kind=SourceKind.MODEL,
                    quotes=[SKY if i == 0 else SEA],
                )
                for i, text in enumerate(texts)
            ]
        )
    settings = BatchSettings(name="sky", template=template, required_probability=0.0, **config)
    return create_feedback_batch(None, settings, groups)


def answer_a(user_message: str) -> str:
    return user_message.split("Answer A:\n", 1)[1].split("\n", 1)[0]


def prefers_the_supported_answer(request: dict[str, Any]) -> tuple:
    """A judge that always prefers the Rayleigh answer, whichever side it is on (and supports claims)."""
    user = request["body"]["messages"][1]["content"]
    if user.startswith("Question:") and "Claim:" in user:
        return chat_ok(json.dumps({"support": "weakly" if "sea" in user else "supported"}))
    code = "a_better" if "Rayleigh" in answer_a(user) else "b_better"
    return chat_ok("```json\n" + json.dumps({"ratings": {"overall": code}, "confidence": 0.9}) + "\n```")


@pytest.fixture(name="endpoint")
def endpoint_fixture(settings, server):  # noqa: F811
    """The endpoint "judge" of ``SAMPLING_ENDPOINTS``: the scripted server, answering as a judge that
    prefers the supported answer (no JSON schema)."""
    settings.SAMPLING_ENDPOINTS = {
        "judge": EndpointConfig("judge", server.url, "smollm2-135m", max_retries=0, timeout_s=5)
    }
    server.script[CHAT] = [prefers_the_supported_answer]
    return server


def judge(user, batch: FeedbackBatch, echo=None, **settings: Any) -> JudgeRun:
    run = request_judge_run(user, JudgeRequest(batch=batch, endpoint="judge", settings=settings), queue=False)
    return run_judge_job(run.pk, echo=echo)


def test_an_endpoint_judge_asks_every_item_in_both_orders_and_stores_both_verdicts(alice, endpoint):
    batch = make_batch(3)
    run = judge(alice, batch, seed=11)
    assert run.status == RunStatus.DONE, run.error
    assert (run.items_done, run.items_total, run.prompt_version) == (3, 3, "comparison-v1")
    rows = list(ModelJudgement.objects.filter(run=run).order_by("item_id", "swapped"))
    assert [(row.item_id, row.swapped) for row in rows] == [
        (i.pk, s) for i in batch.items.order_by("id") for s in (0, 1)
    ]
    for drawn, reverse in zip(rows[::2], rows[1::2], strict=True):
        answers = sorted(drawn.item.answers.values_list("pk", flat=True))
        assert drawn.order == drawn_order(answers, 11, drawn.item_id) and reverse.order == drawn.order[::-1]
        good = Answer.objects.get(pk=drawn.order[0]).text == GOOD
        assert drawn.response["ratings"] == {"overall": "a_better" if good else "b_better"}
        assert reverse.response["ratings"] == {"overall": "b_better" if good else "a_better"}
        assert drawn.confidence == 0.9 and drawn.raw_output.startswith("```json") and drawn.error == ""
    assert run.metrics | {} == run.metrics and run.metrics["consistent"] == run.metrics["both_orders"] == 3
    sent = [call["body"] for call in endpoint.calls(CHAT)]
    assert len(sent) == 6 and len({body["seed"] for body in sent}) == 6
    assert all(body["temperature"] == 0.0 and "response_format" not in body for body in sent)
    assert all("Rayleigh" in body["messages"][1]["content"] and "e.org/sky" not in str(body) for body in sent)
    # Both orders of an item are asked: some request showed the good answer first, some second.
    firsts = {answer_a(body["messages"][1]["content"]) for body in sent}
    assert firsts == {GOOD, POOR}


def test_a_routed_run_routes_its_batch_once_it_has_judged_every_item(alice, bob, endpoint):
    batch = make_batch(4)
    started = submitted_with_claims(batch, bob).item  # a labeler has it: it stays with the labelers
    run = judge(alice, batch, route=True, confidence_threshold=0.85, audit_share=0.0)
    assert run.status == RunStatus.DONE, run.error
    paths = dict(Routing.objects.filter(run=run).values_list("item_id", "path"))
    assert paths.pop(started.pk) == "human" and set(paths.values()) == {"judge"} and len(paths) == 3
    assert not FeedbackItem.objects.filter(pk__in=paths, is_open=True).exists()
    assert (
        run.metrics["routing"] == {"judge": 3, "audit": 0, "human": 1}
        and "Routed: 3 item(s) to judge" in run.log
    )
    unsure = judge(alice, make_batch(2), route=True, confidence_threshold=0.95)  # the fake says 0.9
    assert unsure.metrics["routing"] == {"judge": 0, "audit": 0, "human": 2}


@pytest.mark.parametrize(
    ("kind", "schema_at"),
    [("vllm", ("json_schema", "schema")), ("llamacpp", ("schema",)), ("tgi", ("value",))],
)
def test_a_json_schema_goes_to_a_server_that_constrains_decoding_to_one(
    alice, endpoint, settings, kind, schema_at
):
    settings.SAMPLING_ENDPOINTS = {"judge": replace(settings.SAMPLING_ENDPOINTS["judge"], server=kind)}
    batch = make_batch(1, "minimal_comparison")
    assert judge(alice, batch, check_claims=False).status == RunStatus.DONE
    schema = endpoint.calls(CHAT)[0]["body"]["response_format"]
    for key in schema_at:
        schema = schema[key]
    assert set(schema["properties"]["ratings"]["properties"]) == {"accuracy", "coherence", "overall"}
    assert ModelJudgement.objects.filter(details__constraint="json_schema").count() == 2


def test_a_request_asks_for_a_schema_or_a_command_grammar_and_raw_prompts_only_where_a_server_takes_one():
    schema = JsonSchema("support", SUPPORT_SCHEMA)
    prompt = CompletionRequest(prompt="Claim:", max_new_tokens=16, json_schema=schema)
    assert request_fields("llamacpp", prompt) == ({"json_schema": SUPPORT_SCHEMA}, "json_schema")
    assert request_fields("vllm", prompt)[0]["response_format"]["json_schema"]["name"] == "support"
    assert request_fields("tgi", prompt) == ({}, "none")  # TGI's /v1/completions takes no grammar
    assert request_fields("openai", prompt) == ({}, "none")
    with pytest.raises(ValueError, match="not both"):
        CompletionRequest(
            prompt="x", max_new_tokens=16, json_schema=schema, constraint=Constraint(commands=True)
        )


def test_rankings_and_ratings_are_asked_their_own_fields_and_checked_by_their_rules(alice, endpoint):
    def by_template(request: dict[str, Any]) -> tuple:
        system, user = (message["content"] for message in request["body"]["messages"])
        if "Rank the 4 answers" in system:  # the Rayleigh answer first, whichever slot it is in
            slot = next(n for n in "1234" if f"Answer {n}:\n{GOOD}" in user)
            ranks = {n: 1 if n == slot else 2 for n in "1234"}
            return chat_ok(json.dumps({"ranks": ranks, "confidence": 0.6}))
        return chat_ok(json.dumps({"truthful": "yes", "informative": "maybe"}))  # "maybe" is no choice

    endpoint.script[CHAT] = [by_template]
    ranking = judge(alice, make_batch(1, "ranking", preset="webgpt", always_required=["ranks"]))
    assert ranking.prompt_version == "ranking-v1" and ranking.metrics["consistent"] == 1
    for row in ModelJudgement.objects.filter(run=ranking):
        good = next(slot for slot, pk in enumerate(row.order, 1) if Answer.objects.get(pk=pk).text == GOOD)
        assert row.response["ranks"][str(good)] == 1 and sorted(row.response["ranks"].values()) == [
            1,
            2,
            2,
            2,
        ]
    rating = judge(alice, make_batch(1, "rating", preset="truthfulqa"))
    assert rating.prompt_version == "rating-v1" and rating.metrics["unreadable"] == 2
    assert (
        "informative: Is the answer informative?: choose one of Yes, No."
        in ModelJudgement.objects.filter(run=rating).first().error
    )


def test_a_server_that_cannot_answer_fails_the_run_keeping_whole_items_and_a_rerun_resumes(alice, endpoint):
    refused = (400, {"error": {"message": "model not loaded"}}, {})
    endpoint.script[CHAT] = [prefers_the_supported_answer] * 8 + [
        refused
    ]  # chunk 1 (4 items x 2) then refusals
    batch = make_batch(6)
    run = judge(alice, batch)
    assert run.status == RunStatus.FAILED and "model not loaded" in run.error
    assert run.items_done == 4 and ModelJudgement.objects.filter(run=run).count() == 8
    # The job again (as after a fix): the items stored are skipped, the rest asked.
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED, error="")
    endpoint.script[CHAT] = [prefers_the_supported_answer]
    asked = len(endpoint.calls(CHAT))
    run = run_judge_job(run.pk)
    assert run.status == RunStatus.DONE and run.items_done == 6
    assert len(endpoint.calls(CHAT)) - asked == 4 and ModelJudgement.objects.filter(run=run).count() == 12
    assert "4 item(s) already judged" in run.log


def test_cancel_queued_at_once_and_running_after_the_items_being_judged(alice, endpoint, monkeypatch):
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0)
    batch = make_batch(6)
    queued = request_judge_run(alice, JudgeRequest(batch=batch, endpoint="judge"), queue=False)
    cancel_judge_run(alice, queued)
    queued.refresh_from_db()
    assert queued.status == RunStatus.CANCELLED and run_judge_job(queued.pk).items_done == 0

    def cancel(run: JudgeRun) -> None:  # as the page does, once the first items are judged
        JudgeRun.objects.filter(pk=run.pk).update(cancel_requested=True)

    run = judge(alice, batch, echo=cancel)
    assert run.status == RunStatus.CANCELLED and run.items_done == 4
    assert ModelJudgement.objects.filter(run=run).count() == 8 and "Cancelled" in run.log


def test_a_worker_that_died_leaves_the_run_failed_with_the_reason(alice, endpoint):
    run = request_judge_run(alice, JudgeRequest(batch=make_batch(1), endpoint="judge"), queue=False)
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)  # as the dead worker left it
    run = run_judge_job(run.pk)  # the redelivered message
    assert run.status == RunStatus.FAILED and "worker" in run.error and not endpoint.calls(CHAT)


def test_an_endpoint_no_longer_configured_fails_the_run_with_the_reason(alice, endpoint, settings):
    run = request_judge_run(alice, JudgeRequest(batch=make_batch(1), endpoint="judge"), queue=False)
    settings.SAMPLING_ENDPOINTS = {}
    run = run_judge_job(run.pk)
    assert run.status == RunStatus.FAILED and "no longer configured" in run.error


def submitted_with_claims(batch: FeedbackBatch, labeler) -> Assignment:
    """A labeler's submitted comparison of the batch's first item, a claim marked in each answer."""
    item = batch.items.order_by("id").first()
    order = sorted(item.answers.values_list("pk", flat=True))  # GOOD is A
    marked = {"support": "supported", "relevance": "relevant", "quotes": [0]}
    claims = {
        "A": {"trust": {}, "claims": [{"start": 0, "end": 19, **marked}]},  # "Rayleigh scattering"
        "B": {"trust": {}, "claims": [{"start": 4, "end": 24, **marked}]},  # "sky reflects the sea"
    }
    response = {"answers": claims, "ratings": {"overall": "b_better"}, "flags": {}, "comment": ""}
    return Assignment.objects.create(
        item=item,
        labeler=labeler,
        status=AssignmentStatus.SUBMITTED,
        order=order,
        leased_until=timezone.now() + timedelta(hours=1),
        submitted_at=timezone.now(),
        response=response,
        flags=["overall_contradicts_dimensions"],
    )


def test_claim_checks_give_each_claim_of_a_submitted_comparison_a_second_opinion(alice, bob, endpoint):
    batch = make_batch(2)
    task = submitted_with_claims(batch, bob)
    run = judge(alice, batch, check_claims=True)
    assert run.status == RunStatus.DONE, run.error
    checks = {(c.slot, c.claim): c.support for c in ClaimCheck.objects.filter(run=run, assignment=task)}
    assert checks == {("A", 0): "supported", ("B", 0): "weakly"}
    asked = [c["body"]["messages"][1]["content"] for c in endpoint.calls(CHAT)]
    claims = sorted(text.split("Claim: ", 1)[1].split("\n", 1)[0] for text in asked if "Claim: " in text)
    assert claims == ["Rayleigh scattering", "sky reflects the sea"]
    assert any("Linked quotes:\n[1] Sea\nThe sea is blue." in text for text in asked)
    assert run.metrics["claims_checked"] == 2 and run.metrics["claims_weakly"] == 1
    again = run_judge_job(run.pk)  # a finished run is not run again: nothing is asked twice
    assert again.status == RunStatus.DONE and ClaimCheck.objects.filter(run=run).count() == 2


# --- a reward model as the judge ---


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("judge-rm"), tiny_bert_dir, offset=0.25, max_length=64)


@pytest.fixture
def reward_model(reward_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir)
    )


def test_a_reward_model_judges_the_overall_rating_from_its_scores_in_both_orders(
    alice, reward_model, reward_dir
):
    from browser.engine.observation import format_answer_prompt
    from browser.engine.page import Quote
    from training.sampling.best_of_n import RewardScorer

    batch = make_batch(2)
    settings = {"tie_margin": 0.0, "much_margin": 0.5}
    request = JudgeRequest(batch=batch, reward_model=reward_model, settings=settings)
    run = run_judge_job(request_judge_run(alice, request, queue=False).pk)
    assert run.status == RunStatus.DONE, run.error
    assert (run.judge_kind, run.judge_name, run.prompt_version) == ("reward_model", "tiny-rm", "")
    scorer = RewardScorer(reward_dir)
    for row in ModelJudgement.objects.filter(run=run).select_related("item__question"):
        answers = [Answer.objects.get(pk=pk) for pk in row.order]
        prompts = [format_answer_prompt(row.item.question.text, [Quote(**a.quotes[0])]) for a in answers]
        first, second = scorer.score(prompts, [a.text for a in answers])
        difference = first - second
        expected = "a" if difference > 0 else "b"
        expected += "_much_better" if abs(difference) > 0.5 else "_better"
        assert row.response["ratings"] == {"overall": expected}, (first, second)
        assert "flags" not in row.response and row.details["judged"] == ["ratings"]  # it judges no flag
        assert row.confidence == pytest.approx(1 / (1 + math.exp(-abs(difference))), abs=1e-5)
        assert json.loads(row.raw_output)["scores"]["A"] == pytest.approx(first, abs=1e-5)
    assert run.metrics["consistent"] == 2  # scores do not depend on the order shown


def test_a_reward_model_ranks_by_score(alice, reward_model):
    batch = make_batch(1, "ranking", preset="webgpt", always_required=["ranks"])
    run = run_judge_job(
        request_judge_run(alice, JudgeRequest(batch=batch, reward_model=reward_model), queue=False).pk
    )
    assert run.status == RunStatus.DONE, run.error
    for row in ModelJudgement.objects.filter(run=run):
        scores = [row.details["scores"][str(pk)] for pk in row.order]
        best = max(range(4), key=lambda i: scores[i])
        assert row.response["ranks"][str(best + 1)] == 1 and row.confidence is None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_judge_run_reaches_done_on_a_real_worker_on_the_sampling_queue(
    settings, tmp_path, alice, reward_model, broker_namespace, model_store
):
    batch = make_batch(1)
    run = request_judge_run(alice, JudgeRequest(batch=batch, reward_model=reward_model))  # queued on commit
    with running_worker(worker_env(settings, tmp_path), queues="sampling"):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not JudgeRun.objects.get(pk=run.pk).is_finished:
            time.sleep(0.3)
    run = JudgeRun.objects.get(pk=run.pk)
    assert run.status == RunStatus.DONE, run.error
    assert ModelJudgement.objects.filter(run=run).count() == 2 and run.items_done == 1
