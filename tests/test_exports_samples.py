"""Model samples in the demonstrations and bc-pairs exports: sampled by the real job (tiny random models),
left out by default (exports and the behaviour cloning trained on them stay human unless asked), exported
by kind or by sampling run with where each episode came from, through the export job; the one check of
a request refuses a run that does not exist everywhere; the episodes API shows samples with no user."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from annotation.demonstrations.training_data import bc_examples
from annotation.exports import service as exports
from annotation.exports.rows import pseudonym
from annotation.exports.rules import ExportRequestError, clean_export_request
from annotation.feedback.answers_import import answer_from_episode
from annotation.models import Episode, EpisodeKind, Export, ExportFormat, Question, SourceKind, Split
from tests.test_export_jobs import finished_demonstration
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, RunStatus, Sample, SamplingRun
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling

pytestmark = pytest.mark.django_db
# Where an episode came from, in a demonstrations row.
ORIGIN = ("kind", "demonstrator", "policy", "sampling_run", "sample_index", "score", "chosen", "declined")
TINY = {"n": 2, "max_actions": 3, "max_answer_tokens": 16, "examples": 0, "constrain_commands": True}


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, offset=0.25, max_length=64)


@pytest.fixture
def policy(tiny_llama_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )


def sampling_run(user, policy, reward_model=None, run: bool = True, **settings) -> SamplingRun:
    request = SamplingRequest(
        policy=policy,
        reward_model=reward_model,
        questions=QuestionSet(dataset="demo", limit=1),
        settings=TINY | settings,
    )
    requested = request_sampling(user, request, queue=False)
    if not run:
        return requested
    done = run_sampling_job(requested.pk)
    assert done.status == RunStatus.DONE, done.error
    return done


@pytest.fixture
def demo_question(settings, tmp_path, dana, freshwiki) -> Question:
    """One human demonstration (the AFL question), then the question the models sample."""
    settings.MEDIA_ROOT = tmp_path / "media"
    finished_demonstration(dana)  # first: the demonstrator's next question is the AFL one
    return Question.objects.create(
        text="What happened to the Crimean Bridge in October 2022?",
        key="crimea",
        dataset="demo",
        split=Split.RL,
    )


def export_rows(user, export_format: str, **filters) -> list[dict]:
    """The rows of an export requested and run as the worker runs it (the queue is left out: the test's
    transaction never commits, so nothing is sent)."""
    export = exports.request_export(
        user, export_format, clean_export_request(export_format, "jsonl", **filters)
    )
    export = exports.run_export_job(export.pk)
    assert export.status == "done", export.error
    return [json.loads(line) for line in exports.export_path(export).read_bytes().splitlines()]


def test_samples_are_exported_only_when_asked_for_by_kind_or_run_with_where_they_came_from(
    demo_question, alice, dana, policy, reward_dir
):
    reward = ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir)
    )
    scored = sampling_run(alice, policy, reward)  # best-of-2, scored
    other = sampling_run(alice, policy, n=1, max_actions=2)  # another run, unscored
    human = Episode.objects.get(kind=EpisodeKind.HUMAN)
    assert Episode.objects.filter(kind=EpisodeKind.MODEL).count() == 3

    # The default: human demonstrations only (what every export made before samples existed held).
    rows = export_rows(alice, ExportFormat.DEMONSTRATIONS)
    assert [row["episode"] for row in rows] == [human.pk]
    origin = {key: rows[0][key] for key in ORIGIN}
    assert origin == {"kind": "human", "demonstrator": pseudonym(dana.pk)} | dict.fromkeys(ORIGIN[2:])
    bc = export_rows(alice, ExportFormat.BC_PAIRS)
    assert {row["episode"] for row in bc} == {human.pk} and {row["kind"] for row in bc} == {"human"}

    models = export_rows(alice, ExportFormat.DEMONSTRATIONS, episode_kind="model")
    assert [row["kind"] for row in models] == ["model"] * 3
    assert {(row["demonstrator"], row["policy"]) for row in models} == {(None, "tiny-bc")}
    assert sorted(row["sampling_run"] for row in models) == [scored.pk, scored.pk, other.pk]
    assert len(export_rows(alice, ExportFormat.DEMONSTRATIONS, episode_kind="all")) == 4

    # One run: its samples only, each with its index, reward and best-of-n's choice.
    rows = export_rows(alice, ExportFormat.DEMONSTRATIONS, sampling_run=scored.pk)
    samples = {s.episode_id: s for s in Sample.objects.filter(run=scored).select_related("episode")}
    assert sorted(row["episode"] for row in rows) == sorted(samples)
    for row in rows:
        sample = samples[row["episode"]]
        assert (row["kind"], row["sampling_run"], row["sample_index"]) == ("model", scored.pk, sample.index)
        assert [row["score"], row["chosen"], row["declined"]] == [
            sample.score,
            sample.chosen,
            sample.declined,
        ]
        assert row["commands"] == [a.command for a in sample.episode.actions.order_by("index")]
        assert row["answer"] == sample.episode.answer and row["question"]["full_text"] == demo_question.text
    assert {row["sample_index"] for row in rows} == {0, 1}

    # bc-pairs of one run: every step of its samples replayed on their recorded pages, the public format.
    bc = export_rows(alice, ExportFormat.BC_PAIRS, sampling_run=other.pk)
    episode = Sample.objects.get(run=other).episode
    examples = bc_examples(episode)
    assert len(examples) >= 1 and [(row["prompt"], row["completion"]) for row in bc] == [
        (example["prompt"], example["completion"]) for example in examples
    ]
    assert all(set(row) == {"episode", "question_id", "kind", "step", "prompt", "completion"} for row in bc)
    assert {(row["episode"], row["kind"]) for row in bc} == {(episode.pk, "model")}
    assert [row["step"] for row in bc] == list(range(len(bc)))
    assert bc[0]["prompt"] == episode.actions.get(index=0).observation_before  # what the model saw first

    # The episodes API: researchers see the samples, with no user and the policy named.
    api = APIClient()
    api.force_authenticate(alice)
    listed = api.get("/api/episodes").json()["results"]
    assert sorted((e["kind"], e["user"], e["policy"]) for e in listed) == [
        ("human", "dana", None),
        *[("model", None, "tiny-bc")] * 3,
    ]
    sample_id = next(e["id"] for e in listed if e["kind"] == "model")
    detail = api.get(f"/api/episodes/{sample_id}").json()
    assert detail["user"] is None and detail["actions"][0]["observation_before"]
    api.force_authenticate(dana)  # a demonstrator sees her own episodes, never the samples
    assert [e["kind"] for e in api.get("/api/episodes").json()["results"]] == ["human"]
    assert api.get(f"/api/episodes/{sample_id}").status_code == 404

    # A sample's answer, once judged, says a model wrote it (the random policy writes none: give it one).
    Episode.objects.filter(pk=episode.pk).update(answer="The bridge was damaged by an explosion.")
    episode.refresh_from_db()
    answer = answer_from_episode(episode)
    assert answer.source_kind == SourceKind.MODEL
    assert answer.source == {
        "episode": episode.pk,
        "policy": "tiny-bc",
        "sampling_run": other.pk,
        "sample_index": 0,
    }


def test_a_sampling_run_that_does_not_exist_is_refused_everywhere_and_nothing_is_created(
    demo_question, alice, policy, client_for
):
    run = sampling_run(alice, policy, run=False)  # queued, never run: no samples yet
    missing = run.pk + 100
    with pytest.raises(ExportRequestError) as refused:
        clean_export_request(ExportFormat.DEMONSTRATIONS, "jsonl", sampling_run=missing)
    assert refused.value.field == "sampling_run" and str(missing) in refused.value.message
    with pytest.raises(ExportRequestError) as refused:
        clean_export_request(ExportFormat.DEMONSTRATIONS, "jsonl", episode_kind="robots")
    assert refused.value.field == "episode_kind"

    api = APIClient()
    api.force_authenticate(alice)
    for body in ({"sampling_run": missing}, {"episode_kind": "robots"}):
        response = api.post("/api/exports", {"format": "demonstrations", **body}, format="json")
        assert response.status_code == 400 and set(response.json()) == set(body), response.json()
    with pytest.raises(CommandError, match=f"sampling_run: There is no sampling run {missing}"):
        call_command("export_dataset", "--format", "demonstrations", "--sampling-run", str(missing))
    form = {"export_format": "demonstrations", "sampling_run": missing}
    page = client_for(alice).post("/console/exports/", form)
    assert page.status_code == 400 and f"There is no sampling run {missing}." in page.content.decode()
    assert not Export.objects.exists()

    # A run named implies model samples, whatever the kind field says (its default is human).
    queued = api.post("/api/exports", {"format": "bc-pairs", "sampling_run": run.pk}, format="json")
    assert queued.status_code == 202, queued.json()
    assert {"episode_kind": "model", "sampling_run": run.pk}.items() <= queued.json()["filters"].items()
    page = client_for(alice).post(
        "/console/exports/", {**form, "sampling_run": run.pk, "episode_kind": "human"}
    )
    assert page.status_code == 302
    assert Export.objects.order_by("-pk").first().filters["episode_kind"] == "model"
    assert exports.run_export_job(queued.json()["id"]).row_count == 0  # the run has no samples yet
