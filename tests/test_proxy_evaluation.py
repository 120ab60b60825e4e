"""The reward-model proxy evaluation of best-of-n (WebGPT Figures 5 and 8): the best-of-k expectation
against hand-computed values and against best_of_n's own choice on every subset (ties included), unscored
runs, the bootstrap intervals (reproducible, by hand where they can be), the implied preference; the job
on tiny reward models (the text the run's reward model saw, progress, cancel, failures); the one check
of a request (refusals by field with nothing created, the split warnings) through the page and the API;
the pages, the CSV and who may see them."""

from __future__ import annotations

import csv
import io
import math
from datetime import timedelta
from itertools import combinations

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Episode, EpisodeKind, EpisodeStatus, Export, ExportStatus, Question, Split
from browser.engine.observation import format_answer_prompt
from browser.engine.page import Quote
from tests.test_api import api
from tests.test_sampling_pages import finished_run
from tests.tiny_models import tiny_reward_model
from training.errors import RunError
from training.evaluation import proxy_jobs
from training.evaluation.proxy import ScoredSample, best_of_k, bootstrap_means, ladder, run_curve
from training.evaluation.proxy_jobs import ProxyRequest, request_proxy_evaluation, run_proxy_evaluation_job
from training.models import (
    ModelCheckpoint,
    ProxyEvaluation,
    RunKind,
    RunStatus,
    Sample,
    SamplingRun,
    TrainingRun,
)
from training.runs.metrics import sigmoid

NASTY = '<script>alert("x")</script>'
QUOTE = {
    "title": "Sky",
    "url": "https://en.wikipedia.org/wiki/Sky",
    "domain": "en.wikipedia.org",
    "extract": "Rayleigh scattering makes the sky blue.",
}


def samples(training: list[float | None], validation: list[float]) -> list[ScoredSample]:
    return [ScoredSample(i, t, v) for i, (t, v) in enumerate(zip(training, validation, strict=True))]


# The statistics ------------------------------------------------------------------------------------------

# Ranked by training score: sample 1 (0.9), 2 (0.5), 3 (0.3), 0 (0.1), with validation 2, 3, 4, 1.
FOUR = samples([0.1, 0.9, 0.5, 0.3], [1.0, 2.0, 3.0, 4.0])


def test_best_of_k_is_the_exact_expectation_computed_by_hand():
    assert best_of_k(FOUR, 1) == pytest.approx(2.5)  # the mean
    # The 6 pairs and their winners: {0,1}->1, {0,2}->2, {0,3}->3, {1,2}->1, {1,3}->1, {2,3}->2,
    # validation 2 + 3 + 4 + 2 + 2 + 3 = 16.
    assert best_of_k(FOUR, 2) == pytest.approx(16 / 6)
    # The 4 triples: {0,1,2}->1, {0,1,3}->1, {0,2,3}->2, {1,2,3}->1: 2 + 2 + 3 + 2 = 9.
    assert best_of_k(FOUR, 3) == pytest.approx(9 / 4)
    assert best_of_k(FOUR, 4) == pytest.approx(2.0)  # the top-scored sample's validation score
    for k in (0, 5):
        with pytest.raises(ValueError, match="k must be between 1 and the 4 answered sample"):
            best_of_k(FOUR, k)


def test_ties_rank_the_lower_index_higher_as_best_of_n_does():
    tied = samples([0.5, 0.5, 0.1], [1.0, 3.0, 5.0])
    assert best_of_k(tied, 3) == 1.0  # sample 0 wins the tie with sample 1
    # Pairs: {0,1}->0 (1), {0,2}->0 (1), {1,2}->1 (3).
    assert best_of_k(tied, 2) == pytest.approx(5 / 3)


def test_best_of_k_averages_best_of_n_choose_over_every_subset():
    from training.sampling.best_of_n import choose
    from training.sampling.episode import EpisodeSample

    group = samples([0.2, 0.7, 0.7, -0.3, 0.7, 0.2], [0.5, -1.0, 2.0, 3.0, 0.25, 1.5])
    for k in range(1, len(group) + 1):
        picked = []
        for subset in combinations(group, k):
            answers = [EpisodeSample(episode_index=s.index, question="q", answer="a") for s in subset]
            choice = choose(answers, [s.training for s in subset])
            picked.append(subset[choice.chosen].validation)
        assert best_of_k(group, k) == pytest.approx(sum(picked) / len(picked)), k


def test_an_unscored_run_selects_nothing_so_its_curve_is_flat_at_the_mean():
    unscored = samples([None, None, None], [1.0, 2.0, 6.0])
    assert [best_of_k(unscored, k, selected=False) for k in (1, 2, 3)] == [3.0, 3.0, 3.0]
    points = run_curve([unscored, unscored[:2]], selected=False, seed=0, resamples=200)
    assert [(p.k, p.questions) for p in points] == [(1, 2), (2, 2), (3, 1)]
    assert [p.mean for p in points] == [2.25, 2.25, 3.0]
    assert (points[0].low, points[0].high) == (points[1].low, points[1].high)  # the same resamples
    assert all((p.preference, p.preference_low, p.preference_high) == (0.5, 0.5, 0.5) for p in points)


def test_the_ks_are_powers_of_two_then_the_largest_number_of_answered_samples():
    assert ladder(1) == [1]
    assert ladder(3) == [1, 2, 3]
    assert ladder(6) == [1, 2, 4, 6]
    assert ladder(8) == [1, 2, 4, 8]
    assert ladder(0) == []


def test_a_runs_curve_and_implied_preference_by_hand():
    two = samples([1.0, 0.0], [0.0, 2.0])  # E_1 = 1, E_2 = 0 (the higher-scored one validates at 0)
    points = run_curve([FOUR, two, []], seed=3, resamples=500)  # the third question has no answer
    assert [(p.k, p.questions) for p in points] == [(1, 2), (2, 2), (4, 1)]
    k1, k2, k4 = points
    assert k1.mean == pytest.approx((2.5 + 1.0) / 2) and k1.preference == pytest.approx(0.5)
    assert k2.mean == pytest.approx((16 / 6 + 0.0) / 2)
    # Mean of sigmoid(E_2 - E_1): sigmoid(1/6) = 0.541571, sigmoid(-1) = 0.268941.
    assert k2.preference == pytest.approx((0.541571 + 0.268941) / 2, abs=1e-6)
    assert k4.mean == pytest.approx(2.0) and k4.preference == pytest.approx(sigmoid(2.0 - 2.5))
    assert (k4.low, k4.high) == (k4.mean, k4.mean)  # one question: nothing to resample
    for p in points:
        assert p.low <= p.mean <= p.high and p.preference_low <= p.preference <= p.preference_high


def test_the_bootstrap_is_reproducible_from_its_seed_and_right_by_hand():
    # Two questions at 0 and 1: a resample's mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so the
    # 2.5% and 97.5% quantiles of 1,000 resamples are 0 and 1.
    assert bootstrap_means([[0.0, 1.0]], (0, 1), 1000) == [(0.0, 1.0)]
    assert bootstrap_means([[0.7, 0.7, 0.7]], (0, 1), 300) == [(pytest.approx(0.7), pytest.approx(0.7))]
    values = [[0.1, 0.4, 0.35, 0.8, 0.2, 0.9, 0.55, 0.05]]
    first = bootstrap_means(values, (5, 2), 1000)
    assert first == bootstrap_means(values, (5, 2), 1000)
    assert first != bootstrap_means(values, (6, 2), 1000)
    low, high = first[0]
    assert low < sum(values[0]) / 8 < high
    # Curves: the same seed gives the same intervals, whichever other questions a run has.
    curve = run_curve([FOUR, FOUR[:2], FOUR[1:]], seed=9, resamples=400)
    assert curve == run_curve([FOUR, FOUR[:2], FOUR[1:]], seed=9, resamples=400)
    with pytest.raises(ValueError, match="no rows"):
        bootstrap_means([[]], (0, 1), 10)


# Runs and models ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, offset=0.25, max_length=64)


@pytest.fixture(scope="module")
def validation_dir(tiny_bert_dir, tmp_path_factory):
    # The same random weights, another offset: rewards 0.5 below the run's model, on the same text.
    return tiny_reward_model(tmp_path_factory.mktemp("val"), tiny_bert_dir, offset=0.75, max_length=64)


@pytest.fixture
def reward_model(reward_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="x", path=str(reward_dir)
    )


@pytest.fixture
def validation_model(validation_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-validation", base_model="x", path=str(validation_dir)
    )


@pytest.fixture
def policy(tiny_llama_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="x", path=str(tiny_llama_dir)
    )


def questions(count: int, split: str = Split.EVAL) -> list[Question]:
    start = Question.objects.count()
    return [
        Question.objects.create(text=f"Why is the sky blue? ({i})", key=f"p{i}", dataset="demo", split=split)
        for i in range(start, start + count)
    ]


def crafted_run(
    owner,
    reward_model: ModelCheckpoint | None,
    asked: list[Question],
    answers: list[list[tuple[str, float | None]]],
    *,
    status: str = RunStatus.DONE,
    policy_name: str = "tiny-bc",
) -> SamplingRun:
    """A run as the sampling job stores one: per question, each sample's (answer, training score); an
    answer "" is no answer."""
    run = SamplingRun.objects.create(
        owner=owner,
        policy_name=policy_name,
        reward_model=reward_model,
        reward_model_name=reward_model.name if reward_model else "",
        n=max(len(group) for group in answers),
        question_ids=[q.pk for q in asked],
        status=status,
    )
    for question, group in zip(asked, answers, strict=True):
        for index, (text, score) in enumerate(group):
            episode = Episode.objects.create(
                kind=EpisodeKind.MODEL,
                policy=policy_name,
                question=question,
                status=EpisodeStatus.FINISHED,
                corpus="freshwiki",
                settings={},
                state={"quotes": [QUOTE] if text else []},
                answer=text,
            )
            Sample.objects.create(run=run, episode=episode, question=question, index=index, score=score)
    return run


def validation_rewards(folder, asked: list[Question], texts: list[str]) -> list[float]:
    """What the validation model gives each answer, scored here on the answer prompt built by hand."""
    from training.sampling.best_of_n import RewardScorer

    prompts = [format_answer_prompt(q.text, [Quote(**QUOTE)]) for q in asked]
    return RewardScorer(folder).score(prompts, texts)


def evaluate(user, model, runs, **options) -> ProxyEvaluation:
    evaluation = request_proxy_evaluation(user, ProxyRequest(model, runs, **options), queue=False)
    return run_proxy_evaluation_job(evaluation.pk)


ANSWERS = ["Rayleigh scattering [1].", "Because of the ocean.", "Blue light scatters most [1].", "Dust."]


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_the_job_scores_every_answered_sample_and_draws_each_runs_curve(
    alice, reward_model, validation_model, validation_dir
):
    asked = questions(2)
    scores = [[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.2, -0.4]]
    scored = crafted_run(
        alice, reward_model, asked, [[(a, s) for a, s in zip(ANSWERS, row, strict=True)] for row in scores]
    )
    unscored = crafted_run(alice, None, asked, [[(ANSWERS[0], None), ("", None)], [(ANSWERS[1], None)] * 2])
    evaluation = evaluate(alice, validation_model, [unscored, scored], seed=4, resamples=200)
    assert evaluation.status == RunStatus.DONE, evaluation.error
    assert evaluation.samples_done == evaluation.samples_total == 8 + 3 and evaluation.percent == 100
    assert "11 answered samples of 2 run(s)" in evaluation.log and "curves of 2 run(s)" in evaluation.log

    # Every answered sample got the validation model's reward for the answer prompt with its quotes.
    for run in (scored, unscored):
        for sample in Sample.objects.filter(run=run).select_related("question", "episode"):
            if not sample.episode.answer:
                assert str(sample.pk) not in evaluation.scores
                continue
            [expected] = validation_rewards(validation_dir, [sample.question], [sample.episode.answer])
            assert evaluation.scores[str(sample.pk)] == pytest.approx(expected, abs=1e-5)

    by_run = {curve["run"]: curve for curve in evaluation.results["runs"]}
    assert [curve["run"] for curve in evaluation.results["runs"]] == [scored.pk, unscored.pk]
    curve = by_run[scored.pk]
    assert (curve["selection"], curve["n"], curve["questions"], curve["answered_questions"]) == (
        "reward model",
        4,
        2,
        2,
    )
    points = {point["k"]: point for point in curve["points"]}
    assert sorted(points) == [1, 2, 4]
    v = [validation_rewards(validation_dir, [q] * 4, ANSWERS) for q in asked]
    assert points[1]["mean"] == pytest.approx((sum(v[0]) / 4 + sum(v[1]) / 4) / 2, abs=1e-5)
    # k = 4: the sample the run's reward model scored highest, question by question (0.9 and 0.8).
    assert points[4]["mean"] == pytest.approx((v[0][0] + v[1][1]) / 2, abs=1e-5)
    expected_preference = (sigmoid(v[0][0] - sum(v[0]) / 4) + sigmoid(v[1][1] - sum(v[1]) / 4)) / 2
    assert points[4]["preference"] == pytest.approx(expected_preference, abs=1e-5)
    assert points[1]["preference"] == pytest.approx(0.5) and points[4]["questions"] == 2

    flat = by_run[unscored.pk]
    assert flat["selection"] == "none" and flat["samples"] == 3
    assert [(p["k"], p["questions"]) for p in flat["points"]] == [(1, 2), (2, 1)]
    assert flat["points"][0]["mean"] == pytest.approx((v[0][0] + v[1][1]) / 2, abs=1e-5)
    assert all(p["preference"] == 0.5 for p in flat["points"])
    again = evaluate(alice, validation_model, [unscored, scored], seed=4, resamples=200)
    assert again.results == evaluation.results  # seeded: the same intervals


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_on_a_real_run_the_validation_model_sees_the_text_the_runs_model_scored(
    alice, freshwiki, policy, reward_model, reward_dir, validation_model
):
    questions(2)
    # Commands held to the grammar, seed 1: the random tiny policy quotes, so samples are scored.
    run = finished_run(alice, policy, reward_model, constrain_commands=True, seed=1, n=3)
    answered = list(Sample.objects.filter(run=run, score__isnull=False))
    assert answered, "the tiny policy answered nothing: pick another seed"
    # The run's model under another registry row is still the run's model: refused.
    twin = ModelCheckpoint.objects.create(kind=RunKind.RM, name="twin", base_model="x", path=str(reward_dir))
    with pytest.raises(RunError, match="twin chose the answers of sampling run"):
        evaluate(alice, twin, [run])
    # The validation model has the same weights and an offset 0.5 higher: on the same text, every
    # reward is the run's minus 0.5 (on any other text the random weights would score otherwise).
    evaluation = evaluate(alice, validation_model, [run])
    assert evaluation.status == RunStatus.DONE, evaluation.error
    assert evaluation.scores == pytest.approx({str(s.pk): s.score - 0.5 for s in answered}, abs=1e-5)
    # Best-of-m over all m answered samples is best-of-n's own choice: at the curve's largest k (the
    # most answered samples of a question) the mean is that of the chosen samples of those questions.
    [curve] = evaluation.results["runs"]
    top = curve["points"][-1]
    counts: dict[int, int] = {}
    for sample in answered:
        counts[sample.question_id] = counts.get(sample.question_id, 0) + 1
    chosen = [s.score - 0.5 for s in answered if s.chosen and counts[s.question_id] == top["k"]]
    assert top["questions"] == len(chosen) >= 1
    assert top["mean"] == pytest.approx(sum(chosen) / len(chosen), abs=1e-5)


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_the_job_always_ends_with_a_reason(alice, reward_model, validation_model, tiny_bert_dir):
    asked = questions(1)
    run = crafted_run(alice, reward_model, asked, [[(ANSWERS[0], 0.1), (ANSWERS[1], 0.2)]])

    def queued(model) -> ProxyEvaluation:
        return request_proxy_evaluation(alice, ProxyRequest(model, [run]), queue=False)

    gone = queued(validation_model)
    ModelCheckpoint.objects.filter(pk=validation_model.pk).delete()
    failed = run_proxy_evaluation_job(gone.pk)
    assert failed.status == RunStatus.FAILED and failed.finished_at is not None
    assert "the reward model tiny-validation was deleted from the registry" in failed.error

    backbone = ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="bare", base_model="x", path=str(tiny_bert_dir)
    )
    failed = run_proxy_evaluation_job(queued(backbone).pk)
    assert failed.status == RunStatus.FAILED and "is not a trained reward model" in failed.error

    elsewhere = ModelCheckpoint.objects.create(kind=RunKind.RM, name="r", base_model="x", path="/x")
    redelivered = queued(elsewhere)
    ProxyEvaluation.objects.filter(pk=redelivered.pk).update(status=RunStatus.RUNNING)
    failed = run_proxy_evaluation_job(redelivered.pk)
    assert failed.status == RunStatus.FAILED and "the worker running this job stopped" in failed.error


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_cancel_stops_a_queued_evaluation_at_once_and_a_running_one_keeping_its_scores(
    alice, client_for, reward_model, validation_model, monkeypatch
):
    asked = questions(1)
    run = crafted_run(alice, reward_model, asked, [[(ANSWERS[0], 0.1), (ANSWERS[1], 0.2)]])
    evaluation = request_proxy_evaluation(alice, ProxyRequest(validation_model, [run]), queue=False)
    client = client_for(alice)
    response = client.post(reverse("training:proxy_cancel", args=[evaluation.pk]), follow=True)
    assert f"Proxy evaluation {evaluation.pk}: cancel requested." in response.content.decode()
    assert run_proxy_evaluation_job(evaluation.pk).status == RunStatus.CANCELLED  # never started
    again = client.post(reverse("training:proxy_cancel", args=[evaluation.pk]), follow=True)
    assert "had already finished (cancelled)" in again.content.decode()

    # Issue 23: a cancel read after the last chunk dropped the curves of an evaluation that had scored
    # every sample. The flag is read only while samples are left: this one (one chunk) ends done.
    late = request_proxy_evaluation(alice, ProxyRequest(validation_model, [run]), queue=False)
    ProxyEvaluation.objects.filter(pk=late.pk).update(cancel_requested=True)  # asked once it started
    late = run_proxy_evaluation_job(late.pk)
    assert late.status == RunStatus.DONE and len(late.scores) == 2 and late.results["runs"]

    monkeypatch.setattr(
        "training.evaluation.proxy_jobs.SCORE_CHUNK", 1
    )  # the flag is read after the first sample
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    running = request_proxy_evaluation(alice, ProxyRequest(validation_model, [run]), queue=False)
    ProxyEvaluation.objects.filter(pk=running.pk).update(cancel_requested=True)
    stopped = run_proxy_evaluation_job(running.pk)
    assert stopped.status == RunStatus.CANCELLED and stopped.results == {}
    assert len(stopped.scores) == stopped.samples_done == 1  # the sample scored is kept
    assert "Cancelled: kept the scores of 1 of 2 samples; no curves computed" in stopped.log
    response = api(alice).post(f"/api/proxy-evaluations/{stopped.pk}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "cancelled"


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_a_running_evaluation_shows_the_time_left_at_its_rate(
    alice, client_for, reward_model, validation_model, monkeypatch
):
    """Issue 24: every long job shows an estimate of its time left; an evaluation's comes from the rate at
    which it scores (loading the model came before), written with its progress, gone once it ends."""
    asked = questions(1)
    run = crafted_run(alice, reward_model, asked, [[(text, 0.1) for text in ANSWERS[:3]]])
    monkeypatch.setattr("training.evaluation.proxy_jobs.SCORE_CHUNK", 1)
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    monkeypatch.setattr("core.progress.MIN_ELAPSED_S", 0.0)
    seen = []
    answer = proxy_jobs._answer

    def read_by_a_page_then_answer(sample: Sample) -> object:  # the job reads each sample's answer here
        row = ProxyEvaluation.objects.get()
        seen.append((row.samples_done, row.estimated_end_at is not None))
        return answer(sample)

    monkeypatch.setattr(proxy_jobs, "_answer", read_by_a_page_then_answer)
    evaluation = evaluate(alice, validation_model, [run])
    assert evaluation.status == RunStatus.DONE, evaluation.error
    assert seen == [(0, False), (1, True), (2, True)] and evaluation.estimated_end_at is None
    ProxyEvaluation.objects.filter(pk=evaluation.pk).update(
        status=RunStatus.RUNNING, estimated_end_at=timezone.now() + timedelta(seconds=30)
    )
    url = reverse("training:proxy_evaluation", args=[evaluation.pk])
    partial = " ".join(client_for(alice).get(url, HTTP_HX_REQUEST="true").content.decode().split())
    assert "3 of 3 samples scored · less than a minute left" in partial


# The one check of a request --------------------------------------------------------------------------------


@pytest.fixture
def world(alice, reward_model, validation_model):
    asked = questions(2)
    done = crafted_run(alice, reward_model, asked, [[(ANSWERS[0], 0.1)], [(ANSWERS[1], 0.2)]])
    return {
        "done": done,
        "running": crafted_run(
            alice, reward_model, asked, [[(ANSWERS[0], 0.1)]] * 2, status=RunStatus.RUNNING
        ),
        "silent": crafted_run(alice, reward_model, asked, [[("", None)], [("", None)]]),
        "bc": ModelCheckpoint.objects.create(kind=RunKind.BC, name="a-bc", base_model="x", path="/x"),
        "rm": reward_model,
        "validation": validation_model,
    }


REFUSALS = {
    "no model": (None, ["done"], "reward_model", "choose the validation reward model"),
    "not a reward model": (
        "bc",
        ["done"],
        "reward_model",
        "the validation model must be a registered reward model",
    ),
    "no runs": ("validation", [], "runs", "choose 1 to 8 finished sampling runs, not 0"),
    "too many runs": ("validation", ["many"], "runs", "choose 1 to 8 finished sampling runs, not 9"),
    "unfinished run": ("validation", ["running"], "runs", "has not finished (Running)"),
    "nothing answered": ("validation", ["silent"], "runs", "has no answered samples to score"),
    "the runs' own model": ("rm", ["done"], "reward_model", "tiny-rm chose the answers of sampling run"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", REFUSALS)
def test_the_page_and_the_api_refuse_alike_by_field_and_create_nothing(
    case, alice, client_for, world, django_capture_on_commit_callbacks
):
    model, run_names, field, reason = REFUSALS[case]
    if run_names == ["many"]:
        runs = [world["done"]] + [
            crafted_run(alice, world["rm"], questions(1), [[(ANSWERS[0], 0.1)]]) for _ in range(8)
        ]
    else:
        runs = [world[name] for name in run_names]
    model_id = world[model].pk if model else None
    run_ids = [run.pk for run in runs]
    with django_capture_on_commit_callbacks(execute=False) as queued:
        form = {"runs": run_ids, "seed": 0, "resamples": 1000} | (
            {"reward_model": model_id} if model_id else {}
        )
        page = client_for(alice).post(reverse("training:proxy_evaluations"), form)
        body = {"reward_model": model_id, "runs": run_ids}
        response = api(alice).post("/api/proxy-evaluations", body, format="json")
    assert page.status_code == 400 and response.status_code == 400
    shown = page.context["form"].errors[field]
    # The page offers reward models only: another model's id is not among its choices.
    on_page = "not one of the available choices" if case == "not a reward model" else reason
    assert any(on_page.lower() in error.lower() for error in shown), shown
    assert any(reason in error for error in response.json()[field]), response.json()
    assert not ProxyEvaluation.objects.exists() and not queued


@pytest.mark.django_db
def test_the_api_names_a_missing_model_or_run(alice, world):
    body = {"reward_model": world["validation"].pk, "runs": [world["done"].pk, 2_000_000_000]}
    response = api(alice).post("/api/proxy-evaluations", body, format="json")
    assert response.status_code == 400 and response.json() == {"runs": ["no such sampling run: 2000000000"]}
    body = {"reward_model": 2_000_000_000, "runs": [world["done"].pk]}
    assert api(alice).post("/api/proxy-evaluations", body, format="json").json() == {
        "reward_model": ["no such model"]
    }
    body = {"reward_model": world["validation"].pk, "runs": [world["done"].pk], "sed": 1}
    assert "sed" in api(alice).post("/api/proxy-evaluations", body, format="json").json()
    body = {"reward_model": world["validation"].pk, "runs": [world["done"].pk], "resamples": 5}
    assert api(alice).post("/api/proxy-evaluations", body, format="json").json() == {
        "resamples": ["must be a whole number between 100 and 10000"]
    }
    assert not ProxyEvaluation.objects.exists()


def trained_on(split: str | None, name: str, path: str) -> ModelCheckpoint:
    filters = {"split": split} if split is not None else {}
    export = Export.objects.create(export_format="rm-pairs", status=ExportStatus.DONE, filters=filters)
    run = TrainingRun.objects.create(kind=RunKind.RM, export=export)
    return ModelCheckpoint.objects.create(kind=RunKind.RM, name=name, base_model="x", path=path, run=run)


@pytest.mark.django_db
def test_a_validation_model_that_may_have_seen_the_questions_is_warned_about_not_refused(
    alice, client_for, world, django_capture_on_commit_callbacks
):
    run = world["done"]  # eval questions
    cases = [
        (trained_on("rm", "on-rm", "/x"), []),
        (
            trained_on("eval", "on-eval", "/x"),
            ["on-eval was trained on the eval split, and the runs' questions"],
        ),
        (trained_on(None, "on-all", "/x"), ["on-all was trained on an export of every split"]),
        (world["validation"], ["tiny-validation has no training export on record, so its split is unknown"]),
    ]
    client = client_for(alice)
    for model, expected in cases:
        with django_capture_on_commit_callbacks(execute=False) as queued:
            form = {"reward_model": model.pk, "runs": [run.pk], "seed": 1, "resamples": 100}
            response = client.post(reverse("training:proxy_evaluations"), form, follow=True)
        evaluation = ProxyEvaluation.objects.get(reward_model=model)
        assert (
            len(queued) == 1 and evaluation.settings["seed"] == 1 and evaluation.settings["resamples"] == 100
        )
        assert response.redirect_chain[-1][0] == reverse("training:proxy_evaluation", args=[evaluation.pk])
        # Issue 24: the banner stays true once the polled status says Done (it said "queued").
        requested = f"Proxy evaluation {evaluation.pk} requested: its status below follows it to the end."
        assert next(str(message) for message in response.context["messages"]) == requested
        html = response.content.decode()
        assert len(evaluation.settings["warnings"]) == len(expected)
        for warning, start in zip(evaluation.settings["warnings"], expected, strict=True):
            assert warning.startswith(start)
            assert html.count(warning.replace("'", "&#x27;")) == 2  # the message, and on the page itself
        if not expected:
            assert "Is the validation reward model independent" not in html


# Pages, CSV, API, permissions -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_a_done_evaluation_shows_both_charts_its_numbers_and_a_csv(
    alice, client_for, reward_model, validation_model
):
    asked = questions(2)
    rows = [[(a, s) for a, s in zip(ANSWERS, (0.9, 0.1, 0.5, 0.3), strict=True)]] * 2
    best_of_4 = crafted_run(alice, reward_model, asked, rows, policy_name=f"=cmd {NASTY}")
    best_of_2 = crafted_run(alice, reward_model, asked, [r[:2] for r in rows])
    evaluation = evaluate(alice, validation_model, [best_of_4, best_of_2], resamples=100)
    client = client_for(alice)
    html = client.get(reverse("training:proxy_evaluation", args=[evaluation.pk])).content.decode()
    assert "Done" in html and 'hx-trigger="every 2s"' not in html and "Cancel evaluation" not in html
    assert html.count('<svg class="chart"') == 2
    assert (
        "validation reward of best-of-k" in html and "implied preference of best-of-k over best-of-1" in html
    )
    assert ">1</text>" in html and ">4</text>" in html  # the log2 axis is labelled with k
    assert 'class="interval"' in html and "no better than best-of-1" in html
    assert NASTY not in html and "&lt;script&gt;" in html
    assert "style=" not in html.split("<main", 1)[-1] and "<script>" not in html
    for curve in evaluation.results["runs"]:
        for point in curve["points"]:
            assert f"{point['mean']:.3f}" in html and f"{point['preference']:.3f}" in html
    csv_url = reverse("training:proxy_results_csv", args=[evaluation.pk])
    assert csv_url in html
    download = client.get(csv_url)
    assert download["Content-Type"].startswith("text/csv")
    assert f'filename="proxy-evaluation-{evaluation.pk}.csv"' in download["Content-Disposition"]
    table = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert [(int(r["run"]), int(r["k"])) for r in table] == [
        (best_of_4.pk, 1),
        (best_of_4.pk, 2),
        (best_of_4.pk, 4),
        (best_of_2.pk, 1),
        (best_of_2.pk, 2),
    ]
    first = evaluation.results["runs"][0]["points"][0]
    assert float(table[0]["mean_validation_score"]) == pytest.approx(first["mean"])
    assert float(table[0]["ci95_low"]) == pytest.approx(first["low"]) and table[0]["questions"] == "2"
    assert table[0]["policy"] == f"'=cmd {NASTY}"  # a spreadsheet shows it, never runs it
    assert (
        table[0]["validation_reward_model"] == "tiny-validation" and table[0]["selection"] == "reward model"
    )
    assert math.isclose(float(table[0]["preference_over_k1"]), 0.5)


@pytest.mark.django_db
def test_the_form_is_prefilled_from_a_link_and_a_running_evaluation_polls(alice, client_for, world):
    run = world["done"]
    client = client_for(alice)
    sampling_page = client.get(reverse("training:sampling_run", args=[run.pk])).content.decode()
    link = f"{reverse('training:proxy_evaluations')}?runs={run.pk}"
    assert link in sampling_page and "Evaluate with a validation reward model" in sampling_page
    listing = client.get(reverse("training:sampling_runs")).content.decode()
    assert reverse("training:proxy_evaluations") in listing
    page = client.get(f"{link}&runs=x,{world['running'].pk},99999999999999999999&reward_model=²")
    form = page.context["form"]
    assert page.status_code == 200 and sorted(form.initial["runs"]) == [run.pk, world["running"].pk]
    assert "reward_model" not in form.initial

    evaluation = ProxyEvaluation.objects.create(
        owner=alice,
        reward_model=world["validation"],
        reward_model_name="tiny-validation",
        status=RunStatus.RUNNING,
        samples_done=3,
        samples_total=8,
        settings={"seed": 0, "resamples": 1000, "warnings": []},
    )
    evaluation.sampling_runs.set([run])
    url = reverse("training:proxy_evaluation", args=[evaluation.pk])
    html = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in html and "Cancel evaluation" in html and "3 of 8 samples scored" in html
    assert reverse("training:sampling_run", args=[run.pk]) in html
    partial = client.get(url, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and "<html" not in partial.content.decode()
    assert 'value="37"' in partial.content.decode() and "HX-Request" in partial["Vary"]
    listing = client.get(reverse("training:proxy_evaluations")).content.decode()
    assert url in listing and "3 / 8" in listing
    assert (
        client.get(reverse("training:proxy_results_csv", args=[evaluation.pk])).content.decode().count("\n")
        == 1
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("model_store")
def test_the_api_queues_lists_and_shows_an_evaluation(alice, world, django_capture_on_commit_callbacks):
    body = {"reward_model": world["validation"].pk, "runs": [world["done"].pk, world["done"].pk], "seed": 7}
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = api(alice).post("/api/proxy-evaluations", body, format="json")
    assert response.status_code == 202 and len(queued) == 1, response.json()
    created = response.json()
    assert created["status"] == "queued" and created["sampling_runs"] == [world["done"].pk]
    assert created["settings"]["seed"] == 7 and created["samples_total"] == 2
    run_proxy_evaluation_job(created["id"])
    listed = api(alice).get("/api/proxy-evaluations").json()["results"]
    assert [row["id"] for row in listed] == [created["id"]] and "scores" not in listed[0]
    detail = api(alice).get(f"/api/proxy-evaluations/{created['id']}").json()
    assert detail["status"] == "done" and len(detail["scores"]) == 2
    assert [p["k"] for p in detail["results"]["runs"][0]["points"]] == [1]


@pytest.mark.django_db
def test_only_researchers_reach_proxy_evaluations(alice, bob, dana, charlie, client_for, world):
    evaluation = ProxyEvaluation.objects.create(
        owner=alice, reward_model=world["validation"], reward_model_name="tiny-validation"
    )
    form = {"reward_model": world["validation"].pk, "runs": [world["done"].pk], "seed": 0, "resamples": 100}
    for user in (bob, dana, charlie):
        client = client_for(user)
        assert client.get(reverse("training:proxy_evaluations")).status_code == 403
        assert client.post(reverse("training:proxy_evaluations"), form).status_code == 403
        for name in ("training:proxy_evaluation", "training:proxy_results_csv"):
            assert client.get(reverse(name, args=[evaluation.pk])).status_code == 404
        assert client.post(reverse("training:proxy_cancel", args=[evaluation.pk])).status_code == 404
        assert api(user).get("/api/proxy-evaluations").status_code == 403
        assert api(user).post("/api/proxy-evaluations", form, format="json").status_code == 403
        assert api(user).get(f"/api/proxy-evaluations/{evaluation.pk}").status_code == 404
        assert api(user).post(f"/api/proxy-evaluations/{evaluation.pk}/cancel").status_code == 404
    anonymous = client_for(None).get(reverse("training:proxy_evaluations"))
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))
    assert api().get("/api/proxy-evaluations").status_code == 401
    evaluation.refresh_from_db()
    assert evaluation.status == RunStatus.QUEUED and not evaluation.cancel_requested
    assert ProxyEvaluation.objects.count() == 1


@pytest.mark.django_db
def test_each_runs_own_reward_of_its_chosen_answers_is_shown_beside_the_validation_reward(
    alice, client_for, reward_model, validation_model
):
    """The reward-hacking gap: a policy trained (or answers chosen) against one reward model, judged by
    another; only the chosen answers count, each by both models."""
    asked = questions(2)
    rows = [[(ANSWERS[0], 0.9), (ANSWERS[1], 0.1)], [(ANSWERS[2], 0.5), (ANSWERS[3], 0.7)]]
    run = crafted_run(alice, reward_model, asked, rows, policy_name="rl-run-7")
    samples = list(Sample.objects.filter(run=run).order_by("question_id", "index"))
    samples[0].chosen = samples[3].chosen = True
    Sample.objects.bulk_update(samples, ["chosen"])
    validation = dict(zip((s.pk for s in samples), (0.25, 5.0, 5.0, 0.45), strict=True))
    curve = {"run": run.pk, "policy_name": "rl-run-7", "reward_model_name": "tiny-rm", "n": 2}
    curve |= {
        "selection": "reward model",
        "questions": 2,
        "answered_questions": 2,
        "samples": 4,
        "points": [],
    }
    evaluation = ProxyEvaluation.objects.create(
        owner=alice,
        reward_model=validation_model,
        reward_model_name=validation_model.name,
        status=RunStatus.DONE,
        scores={str(pk): score for pk, score in validation.items()},
        results={"runs": [curve]},
    )
    html = client_for(alice).get(reverse("training:proxy_evaluation", args=[evaluation.pk])).content.decode()
    table = html.split("Training and validation reward of the chosen answers", 1)[1].split("</table>", 1)[0]
    assert "rl-run-7" in table and "tiny-rm" in table
    # training (0.9 + 0.7) / 2 = 0.8; validation (0.25 + 0.45) / 2 = 0.35; the gap 0.45
    assert ">2</td>" in table and ">0.800<" in table and ">0.350<" in table and ">0.450<" in table
