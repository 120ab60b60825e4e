"""Step review (issue 38) through every door: a batch of a demonstration's steps made from the API, the task
page and the API task, the step-labels export (JSONL and Parquet), the results page, agreement, guidelines,
gold references; and what must refuse it (other sources, model judges, the labeler's own episode)."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.test import APIClient

from annotation.demonstrations import service as demos
from annotation.exports import service as exports
from annotation.feedback import assignment as work
from annotation.feedback.alpha_stats import batch_alpha
from annotation.feedback.answers_import import answer_from_episode
from annotation.feedback.batches import BatchSettings, create_batch_from_source, create_feedback_batch
from annotation.feedback.demo_steps import DEMO_POLICY
from annotation.feedback.step_batches import judged_worse
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Episode,
    EpisodeAction,
    EpisodeKind,
    EpisodeStatus,
    Export,
    ExportStatus,
    FeedbackBatch,
    Question,
)
from annotation.questions.service import import_questions
from annotation.workforce import quality
from annotation.workforce.judgements import FIRST_BAD, STEPS, canonical, compare, main_measure
from annotation.workforce.states import qualify_for_role
from core.permissions import Role
from tests.conftest import make_user
from training.errors import RunError
from training.judging.runs import JudgeRequest, check_judge_request
from training.models import RunKind, RunStatus, Sample, SamplingRun
from training.runs import jobs
from training.runs.inputs import check_run

pytestmark = pytest.mark.django_db
COMMANDS = [
    "Search AFL Grand Final 2022",
    "Clicked on link 3",
    "Back",
    "Clicked on link 0",
    "Quote: won by Geelong by a margin of 81 points",
    "End: Answer",
]


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def demonstrate(dana, question: str, commands: Sequence[str], answer: str) -> Episode:
    """``dana`` demonstrates ``question`` (of the bc split) through the demonstrations service."""
    import_questions(json.dumps({"question": question}).encode(), filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = demos.next_episode(dana)
    for command in commands:
        episode.refresh_from_db()
        demos.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version)
    assert demos.submit_answer(episode.pk, dana, answer) == []
    return Episode.objects.human().get()


def model_episode(question: Question, commands: Sequence[str]) -> Episode:
    """A finished model episode of ``commands`` (each action with an observation of its own), stored as a
    sampling run stores one."""
    episode = Episode.objects.create(
        kind=EpisodeKind.MODEL, policy="tiny", question=question, status=EpisodeStatus.FINISHED,
        settings={}, state={"quotes": []}, answer="Geelong.",
    )  # fmt: skip
    for index, command in enumerate(commands):
        EpisodeAction.objects.create(
            episode=episode, index=index, command=command, valid=True,
            observation_before=f"♦Question\n{question.text}\n♦Page {index}", page_before="", page_after="",
        )  # fmt: skip
    return episode


@pytest.fixture
def episode(freshwiki, dana) -> Episode:
    return demonstrate(
        dana, "Who won the 2022 AFL Grand Final, and by how much?", COMMANDS, "Geelong, by 81 points [1]."
    )


@pytest.fixture
def batch(episode, alice) -> FeedbackBatch:
    body = {
        "name": "Steps of the AFL demonstration",
        "template": "step_review",
        "source": "demonstrations",
        "overlap": 2,
        "required_probability": 0.0,
    }
    created = api(alice).post("/api/batches", body, format="json")
    assert created.status_code == 201, created.json()
    return FeedbackBatch.objects.get(pk=created.json()["id"])


def test_a_step_review_batch_holds_one_item_per_finished_episode_and_refuses_what_it_cannot_read(
    batch, episode, alice
):
    item = batch.items.get()
    assert (item.episode_id, item.question_id, list(item.answers.all())) == (
        episode.pk,
        episode.question_id,
        [],
    )
    assert batch.origin == {"source": "demonstrations", "demonstration_batch": None, "episodes": 1}
    base = {"name": "x", "template": "step_review"}
    refusals = {
        "source": {**base, "source": "bank"},
        "judged_worse": {**base, "source": "demonstrations", "judged_worse": True},
        "demonstration_batch": {**base, "source": "demonstrations", "demonstration_batch": 999},
        "gold_pairs": {**base, "source": "demonstrations", "gold_pairs": "1 > 2"},
        "include_declined": {**base, "source": "runs", "runs": [], "include_declined": True},
    }
    for field, body in refusals.items():
        refused = api(alice).post("/api/batches", body, format="json")
        assert refused.status_code == 400 and field in refused.json(), (field, refused.json())
    answers = api(alice).post(
        "/api/batches", {"name": "x", "template": "rating", "preset": "truthfulqa", "source": "bank",
                         "judged_worse": True}, format="json",
    )  # fmt: skip
    assert answers.status_code == 400 and "step reviews" in answers.json()["judged_worse"][0]
    assert FeedbackBatch.objects.count() == 1
    with pytest.raises(RunError, match="process reward model"):
        check_judge_request(JudgeRequest(batch=batch, endpoint="any", settings={}))


def test_a_labeler_reviews_the_steps_on_the_page_drafts_are_kept_and_a_wrong_mark_is_explained(
    batch, episode, bob, client_for
):
    client = client_for(bob)
    started = client.post("/tasks/start/")
    task = Assignment.objects.get(labeler=bob)
    assert started.url == f"/tasks/{task.pk}/"
    page = client.get(started.url).content.decode()
    assert f"Step 1 of {len(COMMANDS)}" in page and "Clicked on link 3" in page
    first = episode.actions.get(index=0).observation_before
    assert first.splitlines()[0] in page  # the observation as the model saw it
    assert "dana" not in page and "Geelong, by 81 points" in page  # blind; the answer it wrote
    assert 'src="/static/js/step_review.js"' in page

    fields = {
        "submit_key": str(uuid.uuid4()),
        "version": "0",
        "step-0-rating": "good",
        "step-1-rating": "bad",
    }
    draft = client.post(f"/tasks/{task.pk}/draft/", {**fields, "step-1-reason": "wrong_link"})
    assert draft.status_code == 200
    task.refresh_from_db()
    assert task.draft["steps"] == {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "wrong_link"}}

    refused = client.post(f"/tasks/{task.pk}/submit/", fields, follow=True).content.decode()
    assert (
        "Say why the step is bad." in refused and "Mark the first bad step (step 2 is rated bad)." in refused
    )
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED  # nothing stored; the draft keeps what was sent

    done = {**fields, "step-1-reason": "wrong_link", "first_bad": "1", "then": "list"}
    assert client.post(f"/tasks/{task.pk}/submit/", done).url == "/tasks/"
    task.refresh_from_db()
    assert task.status == AssignmentStatus.SUBMITTED
    assert task.response == {
        "steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "wrong_link", "note": ""}},
        "first_bad": 1,
        "comment": "",
    }


def review_over_api(user, response: dict) -> dict:
    task = api(user).post("/api/tasks/next").json()
    body = {"response": response, "key": str(uuid.uuid4()), "version": task["version"]}
    submitted = api(user).post(f"/api/tasks/{task['id']}/submit", body, format="json")
    assert submitted.status_code == 200, submitted.json()
    return task


def test_over_the_api_the_task_is_the_episode_blind_and_errors_come_by_step(batch, episode, bob):
    task = api(bob).post("/api/tasks/next").json()
    assert task["template"] == "step_review" and task["answers"] == []
    assert [step["action"] for step in task["steps"]] == COMMANDS
    assert task["steps"][0]["observation"] == episode.actions.get(index=0).observation_before
    assert task["written_answer"]["text"] == "Geelong, by 81 points [1]."
    assert [r["code"] for r in task["step_ratings"]] == ["good", "neutral", "bad"]
    assert task["required"] == ["steps.0"]
    assert "dana" not in json.dumps(task) and "episode_id" not in json.dumps(task)
    bad = {"steps": {"0": {"rating": "good"}, "9": {"rating": "good"}}, "first_bad": None}
    body = {"response": bad, "key": str(uuid.uuid4())}
    refused = api(bob).post(f"/api/tasks/{task['id']}/submit", body, format="json")
    assert refused.status_code == 400
    errors = refused.json()["errors"]
    assert errors["steps.9"].startswith("There is no step '9'") and errors["steps.1"] == "Rate step 2."


def all_good(steps: int) -> dict:
    return {"steps": {str(i): {"rating": "good"} for i in range(steps)}, "first_bad": None}


def test_the_step_labels_export_round_trips_in_jsonl_and_parquet_and_agreement_is_measured(
    batch, episode, bob, django_user_model, client_for, alice
):
    carol = make_user(django_user_model, "carol", "labeler")
    review_over_api(bob, {"steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "wrong_link"}},
                          "first_bad": 1})  # fmt: skip
    review_over_api(carol, all_good(len(COMMANDS)))
    out = io.BytesIO()
    assert exports.write_rows("step-labels", {}, out) == 2 + len(COMMANDS)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    observations = list(episode.actions.order_by("index").values_list("observation_before", flat=True))
    assert [(row["step"], row["action"], row["rating"]) for row in rows[:2]] == [
        (0, COMMANDS[0], "good"),
        (1, COMMANDS[1], "bad"),
    ]
    assert all(row["observation"] == observations[row["step"]] for row in rows)
    assert {row["episode_id"] for row in rows} == {episode.pk} and rows[1]["reason"] == "wrong_link"
    assert [row["first_bad"] for row in rows] == [1, 1] + [None] * len(COMMANDS)
    assert "bob" not in out.getvalue().decode() and rows[0]["labeler"] != rows[2]["labeler"]
    parquet = io.BytesIO()
    exports.write_rows("step-labels", {}, parquet, file_type="parquet")
    table = pq.read_table(io.BytesIO(parquet.getvalue())).to_pylist()
    assert [{key: row[key] for key in rows[0]} for row in table] == rows

    # Agreement: on the one shared episode the two disagree on the first bad step (step 2 vs none).
    alphas = {row.measure: row.result for row in batch_alpha(batch, resamples=50)}
    assert set(alphas) == {"step_ratings", "first_bad"} and alphas["first_bad"].items == 1
    page = client_for(alice).get(f"/console/feedback/{batch.pk}/results/").content.decode()
    assert "Episodes with a bad step" in page and "Agreement on the first bad step" in page
    assert "the same step marked by 0.00 of 1 pair" in page


def test_the_labeler_never_reviews_their_own_episode(batch, episode, dana):
    dana.groups.add(Group.objects.get_or_create(name="labeler")[0])
    qualify_for_role(dana, Role.LABELER, by=None, reason="a demonstrator who labels too")
    assert api(dana).post("/api/tasks/next").status_code == 204


def test_a_reference_scores_the_first_bad_step_and_the_guidelines_show_a_worked_example(
    batch, bob, client_for
):
    mine = canonical(
        "step_review", {"steps": {"0": {"rating": "good"}, "1": {"rating": "bad"}}, "first_bad": 1}, []
    )
    reference = canonical("step_review", all_good(2), [])
    assert mine == {FIRST_BAD: 1, STEPS: {"0": "good", "1": "bad"}}
    assert compare("step_review", mine, reference) == {FIRST_BAD: 0.0, STEPS: 0.5}
    assert main_measure("step_review") == FIRST_BAD
    page = client_for(bob).get("/tasks/guidelines/step_review/").content.decode()
    assert "Worked example" in page and "Wrong link" in page and "First bad step: step 2." in page


def test_the_create_feedback_batch_command_makes_a_step_review_of_one_demonstration_batch(episode, capsys):
    call_command("create_feedback_batch", "steps", "--template", "step_review", "--source", "demonstrations")
    assert "1 items (step_review)" in capsys.readouterr().out


def test_the_demo_has_a_step_review_batch_of_scripted_episodes_one_with_a_wrong_turn(demo_site):
    batch = FeedbackBatch.objects.get(template="step_review")
    episodes = [item.episode for item in batch.items.select_related("episode")]
    assert len(episodes) == 2 and {episode.policy for episode in episodes} == {DEMO_POLICY}
    commands = [list(e.actions.order_by("index").values_list("command", flat=True)) for e in episodes]
    assert [c[-2:] for c in commands] == [[c[-2], "End: Answer"] for c in commands]
    assert sum("Back" in c for c in commands) == 1  # the detour: a wrong click, then back
    assert all(a.valid for e in episodes for a in e.actions.all())
    # Their clicks, each against the click the script did not make: one; then the wrong one, the right one.
    clicks = FeedbackBatch.objects.get(template="step_preference").items.order_by("episode_id", "step__index")
    assert [(item.episode in episodes, len(set(item.step["candidates"]))) for item in clicks] == [
        (True, 2)
    ] * 3


def test_a_prm_run_trains_on_the_step_labels_export_and_registers_its_model(
    batch, episode, bob, django_user_model, alice, tiny_bert_dir, model_store, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    carol = make_user(django_user_model, "carol", "labeler")
    review_over_api(bob, {"steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "wrong_link"}},
                          "first_bad": 1})  # fmt: skip
    review_over_api(carol, all_good(len(COMMANDS)))
    export = Export.objects.create(owner=alice, export_format="step-labels")
    exports.run_export_job(export.pk)
    export.refresh_from_db()
    assert (export.status, export.row_count) == (ExportStatus.DONE, 2 + len(COMMANDS))
    with pytest.raises(RunError, match="only for a process reward model"):
        check_run(RunKind.RM, None, "fast", {"labels": "ratings"}, None)
    with pytest.raises(RunError, match="needs a rm-pairs or rm-groups export"):
        jobs.request_run(alice, RunKind.RM, export, {}, "fast", queue=False)
    fast = {"max_steps": 4, "batch_size": 4, "max_length": 64, "validation_fraction": 0.0}
    run = jobs.request_run(
        alice, RunKind.PRM, export, fast | {"base_model": str(tiny_bert_dir), "labels": "ratings"}, "fast",
        queue=False, local_paths=True,
    )  # fmt: skip
    run = jobs.run_training_job(run.pk)
    assert run.status == RunStatus.DONE, run.error
    assert run.checkpoint.kind == RunKind.PRM and run.metrics["train_examples"] == 2 + len(COMMANDS)
    assert f"Warning: {2 + len(COMMANDS)} step labels" in run.log  # too few to rely on, and it says so
    summary = json.loads((Path(run.checkpoint.path) / "training.json").read_text())
    assert summary["kind"] == "prm" and summary["config"]["labels"] == "ratings"
    # The command's file mode: the same trainer on the export's file, no registry.
    out = io.StringIO()
    call_command(
        "train_prm", "--data", str(exports.export_path(export)), "--output", str(tmp_path / "cli-prm"),
        "--base-model", str(tiny_bert_dir), "--max-steps", "2", "--max-length", "64", "--labels", "ratings",
        "--validation-fraction", "0", stdout=out,
    )  # fmt: skip
    assert "2 steps; model in" in out.getvalue()
    assert json.loads((tmp_path / "cli-prm" / "training.json").read_text())["kind"] == "prm"


def test_every_console_page_of_a_step_batch_renders_and_a_reference_scores_a_gold_item(
    batch, episode, alice, bob, client_for
):
    client = client_for(alice)
    for page in ("", "results/", "flags/", "gold/", "results/labelers.csv"):
        response = client.get(f"/console/feedback/{batch.pk}/{page}")
        assert response.status_code == 200, (page, response.status_code)
    assert api(alice).get(f"/api/batches/{batch.pk}").status_code == 200
    assert api(alice).get(f"/api/batches/{batch.pk}/agreement").status_code == 200
    # A researcher's reference on the item makes it gold: bob's first bad step is scored against it.
    item = batch.items.get()
    started = client.post(f"/console/feedback/{batch.pk}/gold/reference/", {"item": item.pk}, follow=True)
    assert started.status_code == 200 and "Step 1 of" in started.content.decode()
    reference = Assignment.objects.get(labeler=alice, item=item)
    fields = {"submit_key": str(uuid.uuid4()), "version": str(reference.version), "step-0-rating": "good",
              "step-1-rating": "bad", "step-1-reason": "wrong_link", "first_bad": "1"}  # fmt: skip
    client.post(f"/tasks/{reference.pk}/submit/", fields)
    item.refresh_from_db()
    assert item.gold_expected == {FIRST_BAD: 1, STEPS: {"0": "good", "1": "bad"}}


def test_the_whole_page_of_a_step_opens_for_the_tasks_labeler_only(
    batch, episode, bob, django_user_model, client_for
):
    task = review_over_api(bob, all_good(len(COMMANDS)))
    after_search = episode.actions.get(index=1).page_before
    page = client_for(bob).get(f"/tasks/{task['id']}/steps/1/page/")
    assert page.status_code == 200 and "Search results for: AFL Grand Final 2022" in page.content.decode()
    assert after_search in episode.state["pages"]
    assert client_for(bob).get(f"/tasks/{task['id']}/steps/99/page/").status_code == 404
    stranger = make_user(django_user_model, "erin", "labeler")
    assert client_for(stranger).get(f"/tasks/{task['id']}/steps/1/page/").status_code == 404
    assert (
        f"/tasks/{task['id']}/steps/1/page/" in client_for(bob).get(f"/tasks/{task['id']}/").content.decode()
    )


def test_a_step_review_screening_test_scores_an_applicant_on_the_first_bad_step(
    episode, alice, django_user_model
):
    """A screening test of the step-review kind (every applicant reviews every item, against the researchers'
    references): the applicant's first bad step is scored, and the test is what their state waits on."""
    config = BatchSettings("steps test", "step_review", is_screening=True, required_probability=0.0)
    batch = create_batch_from_source(alice, config, "demonstrations")
    item = batch.items.get()
    item.is_gold = True
    item.gold_expected = canonical("step_review", {"steps": {"0": {"rating": "good"}, "1": {"rating": "bad"}},
                                                   "first_bad": 1}, [])  # fmt: skip
    item.save()
    applicant = make_user(django_user_model, "ann", "labeler", applicant=True)
    task = api(applicant).post("/api/tasks/next").json()
    assert task["template"] == "step_review"
    body = {"response": {"steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "wrong_link"}},
                         "first_bad": 1}, "key": str(uuid.uuid4())}  # fmt: skip
    assert api(applicant).post(f"/api/tasks/{task['id']}/submit", body, format="json").status_code == 200
    (test,) = quality.report(applicant).screenings
    assert [(score.measure, score.figure.accuracy) for score in test.scores] == [
        (FIRST_BAD, 1.0),
        (STEPS, 1.0),
    ]


def test_only_the_episodes_a_comparison_judged_worse(alice, bob, freshwiki, django_user_model):
    """From sampling runs, "only episodes judged worse": the samples whose answer lost its comparisons."""
    question = Question.objects.create(text="Who won?", key="w", dataset="demo", split="eval")
    first, second = (model_episode(question, ("Search who won", "End: Answer")) for _ in range(2))
    run = SamplingRun.objects.create(policy_name="tiny", question_ids=[question.pk], status=RunStatus.DONE)
    for index, sampled in enumerate((first, second)):
        Sample.objects.create(run=run, episode=sampled, question=question, index=index)
    answers = [answer_from_episode(e) for e in (first, second)]
    create_feedback_batch(
        None, BatchSettings("pair", "minimal_comparison", required_probability=0.0), [answers]
    )
    task = work.next_assignment(bob)
    better = "a_much_better" if task.order[0] == answers[0].pk else "b_much_better"  # the first episode wins
    response = {"ratings": {"accuracy": better, "coherence": better, "overall": better}}
    assert work.submit(task.pk, bob, response, uuid.uuid4()).validation.complete
    assert judged_worse([first.pk, second.pk]) == {second.pk}
    config = BatchSettings("worse", "step_review", runs=[run.pk], judged_worse=True)
    batch = create_batch_from_source(alice, config, "runs")
    assert [item.episode_id for item in batch.items.all()] == [second.pk]
    assert batch.origin["not_judged_worse"] == 1 and list(batch.sampling_runs.all()) == [run]
