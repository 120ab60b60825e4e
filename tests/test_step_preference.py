"""Step preferences (issue 38; Web-Shepherd's form) through every door: a guided sampling run keeps every
candidate command of each guided step, a step-preference batch is made of its states (the command taken
against the one the step model scored lowest), labelers judge A against B on the page and the API (blind:
never which one the episode took), the step-labels export carries the preferences (JSONL and Parquet), the
results say how often labelers prefer the step model's choice, and a process reward model trains on them."""

from __future__ import annotations

import io
import json
import uuid

import pyarrow.parquet as pq
import pytest
from rest_framework.test import APIClient

from annotation.exports import service as exports
from annotation.feedback.alpha_stats import batch_alpha
from annotation.feedback.batches import BatchError, BatchSettings, create_batch_from_source
from annotation.feedback.results import batch_results
from annotation.models import EpisodeAction, FeedbackBatch
from tests.conftest import make_user
from tests.test_sampling_jobs import (  # noqa: F401 (fixtures)
    TINY,
    guided,
    policy,
    questions,
    reward_dir,
    reward_model,
    step_model,
)
from tests.test_step_review import COMMANDS, demonstrate
from training.errors import RunError
from training.models import RunStatus, Sample, StepCandidate
from training.runs.config import PRMConfig
from training.runs.prm import train_prm
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def guided_run(alice, freshwiki, policy, reward_model, step_model):  # noqa: F811
    questions(2)
    return guided(alice, policy, reward_model, step_model)


def test_a_guided_run_keeps_the_candidates_and_a_batch_pairs_the_taken_command_with_the_worst(
    guided_run, alice
):
    guided = EpisodeAction.objects.filter(episode__sample__run=guided_run, episode__sample__guided=True)
    assert guided.exists() and all(len(action.candidates) == 3 for action in guided)
    for action in guided:
        assert action.command in [c["command"] for c in action.candidates]
    unguided = EpisodeAction.objects.filter(episode__sample__run=guided_run, episode__sample__guided=False)
    assert not any(action.candidates for action in unguided)

    body = {"name": "Which next action", "template": "step_preference", "source": "runs",
            "runs": [guided_run.pk], "overlap": 2, "required_probability": 0.0}  # fmt: skip
    refused = api(alice).post("/api/batches", {**body, "source": "demonstrations", "runs": []}, format="json")
    assert refused.status_code == 400 and "at demonstration states" in refused.json()["source"][0]
    created = api(alice).post("/api/batches", body, format="json")
    assert created.status_code == 201, created.json()
    batch = FeedbackBatch.objects.get(pk=created.json()["id"])
    assert batch.items.count() == batch.origin["states"] > 0
    for item in batch.items.all():
        action = EpisodeAction.objects.get(episode=item.episode, index=item.step["index"])
        candidates = item.step["candidates"]
        assert candidates[item.step["taken"]] == action.command and len(set(candidates)) == 2
        worst = min(action.candidates, key=lambda c: c["score"] if c["command"] != action.command else 1e9)
        assert candidates[1 - item.step["taken"]] == worst["command"]


def test_an_unguided_run_makes_no_step_preferences(alice, freshwiki, policy):  # noqa: F811
    questions(1)
    request = SamplingRequest(policy=policy, questions=QuestionSet(dataset="demo"), settings=TINY | {"n": 1})
    run = run_sampling_job(request_sampling(alice, request, queue=False).pk)
    config = BatchSettings("prefs", "step_preference", runs=[run.pk])
    with pytest.raises(BatchError, match="sample with a step model"):
        create_batch_from_source(alice, config, "runs")
    assert not FeedbackBatch.objects.exists()


def test_labelers_judge_the_two_actions_blind_and_the_labels_export_and_train_a_prm(
    guided_run, alice, bob, django_user_model, client_for, tiny_bert_dir, tmp_path
):
    config = BatchSettings(
        "prefs", "step_preference", runs=[guided_run.pk], overlap=2, required_probability=0.0
    )
    batch = create_batch_from_source(alice, config, "runs")
    FeedbackBatch.objects.filter(pk=batch.pk).update(item_count=1)
    batch.items.exclude(pk=batch.items.first().pk).delete()  # one state, judged by two labelers
    item = batch.items.get()
    action = EpisodeAction.objects.get(episode=item.episode, index=item.step["index"])

    task = api(bob).post("/api/tasks/next").json()
    assert task["template"] == "step_preference" and task["answers"] == [] and task["steps"] == []
    assert [c["action"] for c in task["candidates"]] == item.step["candidates"]
    assert [c["slot"] for c in task["candidates"]] == ["A", "B"]
    assert task["state"]["observation"] == action.observation_before and task["required"] == ["preference"]
    assert "taken" not in json.dumps(task) and len(task["scale"]) == 5
    missing = {"response": {"reason": "other"}, "key": str(uuid.uuid4())}
    refused = api(bob).post(f"/api/tasks/{task['id']}/submit", missing, format="json")
    assert refused.status_code == 400
    assert set(refused.json()["errors"]) == {"preference", "comment"}
    body = {"response": {"preference": "a_better", "reason": "wrong_link"}, "key": str(uuid.uuid4())}
    assert api(bob).post(f"/api/tasks/{task['id']}/submit", body, format="json").status_code == 200

    # The whole page of the state opens; the page of the step after it would tell which action was taken.
    state_page = f"/tasks/{task['id']}/steps/{item.step['index']}/page/"
    assert client_for(bob).get(state_page).status_code == 200
    later = f"/tasks/{task['id']}/steps/{item.step['index'] + 1}/page/"
    assert client_for(bob).get(later).status_code == 404
    carol = make_user(django_user_model, "carol", "labeler")
    client = client_for(carol)
    started = client.post("/tasks/start/")
    page = client.get(started.url).content.decode()
    assert "Two possible next actions" in page and item.step["candidates"][1] in page
    form = {"submit_key": str(uuid.uuid4()), "version": "0", "preference": "b_much_better", "then": "list"}
    assert client.post(started.url + "submit/", form).url == "/tasks/"

    out = io.BytesIO()
    assert exports.write_rows("step-labels", {"batch": batch.pk}, out) == 2
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["kind"], r["preference"], r["step"]) for r in rows] == [
        ("preference", "a_better", item.step["index"]),
        ("preference", "b_much_better", item.step["index"]),
    ]
    assert all([r["action_a"], r["action_b"]] == item.step["candidates"] for r in rows)
    assert rows[0]["observation"] == action.observation_before and rows[0]["reason"] == "wrong_link"
    parquet = io.BytesIO()
    exports.write_rows("step-labels", {"batch": batch.pk}, parquet, file_type="parquet")
    table = pq.read_table(io.BytesIO(parquet.getvalue())).to_pylist()
    assert [{key: row[key] for key in rows[0]} for row in table] == rows

    # bob prefers A, carol B much better: one of them agrees with the step model's choice.
    figure = batch_results(batch, resamples=50)["step_preference"]["prefers_step_model"]
    assert (figure["value"], figure["judgements"]) == (0.5, 2)
    assert [row.measure for row in batch_alpha(batch, resamples=50)] == ["preference"]
    page = client_for(alice).get(f"/console/feedback/{batch.pk}/results/").content.decode()
    assert "Labelers prefer the action the episode took" in page

    data = tmp_path / "step-labels.jsonl"
    data.write_bytes(out.getvalue())
    cfg = PRMConfig(
        data=str(data),
        output_dir=str(tmp_path / "prm"),
        base_model=str(tiny_bert_dir),
        labels="preferences",
        max_steps=2,
        batch_size=2,
        max_length=64,
        validation_fraction=0.0,
    )
    result = train_prm(cfg)
    assert result.train_examples == 2 and result.steps == 2


def test_the_guidelines_explain_the_scale_with_an_example(client_for, bob):
    page = client_for(bob).get("/tasks/guidelines/step_preference/").content.decode()
    assert "Two possible next actions" not in page and "B much better" in page and "Worked example" in page


def test_a_run_at_demonstration_states_sets_a_policys_action_against_the_demonstrators(
    alice,
    dana,
    freshwiki,
    policy,  # noqa: F811
    reward_model,  # noqa: F811
):
    """The second source of step preferences: a policy's next action at states of a human demonstration
    (its first, middle and last actions), replayed on the pages it recorded, against the demonstrator's."""
    demonstration = demonstrate(dana, "Who won the 2022 AFL Grand Final?", COMMANDS, "Geelong [1].")
    at_states = TINY | {"at_states": True}
    questions = QuestionSet(split="bc")
    for wrong, field in (
        ({"reward_model": reward_model}, "reward_model"),
        ({"questions": QuestionSet(split="rm")}, "questions"),
    ):
        with pytest.raises(RunError) as refused:
            request_sampling(
                alice,
                SamplingRequest(
                    **({"policy": policy, "questions": questions, "settings": at_states} | wrong)
                ),
                queue=False,
            )
        assert refused.value.field == field
    run = request_sampling(
        alice, SamplingRequest(policy=policy, questions=questions, settings=at_states), queue=False
    )
    assert (run.n, run.episodes_total) == (1, 3)  # n does not apply; states 0, 2 and 5 of six actions
    run = run_sampling_job(run.pk)
    assert run.status == RunStatus.DONE, run.error
    figures = run.metrics["at_states"]
    assert (figures["demonstrations"], figures["states"], run.episodes_done) == (1, 3, 3)
    kept = list(StepCandidate.objects.filter(run=run).select_related("action"))
    assert len(kept) == figures["candidates"] >= 1
    for candidate in kept:
        assert candidate.action.episode_id == demonstration.pk and candidate.action.index in (0, 2, 5)
        assert candidate.command != candidate.action.command
    assert Sample.objects.filter(run=run).count() == 0  # nothing browsed onward

    batch = create_batch_from_source(alice, BatchSettings("vs", "step_preference", runs=[run.pk]), "runs")
    assert batch.items.count() == len(kept)
    for item in batch.items.all():
        action = demonstration.actions.get(index=item.step["index"])
        assert item.step["kind"] == "demonstration" and item.episode_id == demonstration.pk
        assert item.step["candidates"][item.step["taken"]] == action.command  # the demonstrator's
    assert api(dana).post("/api/tasks/next").status_code in (403, 204)  # never their own demonstration
