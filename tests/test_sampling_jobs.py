"""Sampling runs as jobs: one check of every input before anything is created, samples stored as episodes
of kind model (actions, pages, answers) with their scores and best-of-n's choice, seeded runs that
reproduce, declining below a threshold, a cancel keeping every question it finished, a crash recorded,
an unreachable endpoint failing with the reason, and the whole path on a real Celery worker on the
``sampling`` queue."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from annotation.demonstrations.service import next_episode
from annotation.models import EpisodeAction, EpisodeKind, EpisodeStatus, Question, Split
from browser.models import PageSnapshot
from tests.conftest import make_user, refused_port, running_worker
from tests.test_sampling_core import seeded_tiny_llama
from tests.test_training_jobs import worker_env
from tests.tiny_models import tiny_reward_model
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind, RunStatus, Sample, SamplingRun
from training.runs.jobs import delete_checkpoint
from training.sampling.endpoints import EndpointConfig
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import QuestionSet, SamplingRequest, cancel_sampling, request_sampling

pytestmark = pytest.mark.django_db
# Seed 5 of the tiny random policy, constrained to the command grammar, quotes and answers on one of
# these questions and not on the other: both sides of best-of-n are exercised. Short commands keep it fast.
TINY = {
    "n": 2,
    "max_actions": 4,
    "max_command_tokens": 10,
    "max_answer_tokens": 12,
    "examples": 0,
    "constrain_commands": True,
    "seed": 5,
}


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, offset=0.25, max_length=64)


@pytest.fixture(scope="module")
def seeded_llama_dir(tmp_path_factory):
    return seeded_tiny_llama(tmp_path_factory.mktemp("tiny-llama-seeded"))


@pytest.fixture
def policy(tiny_llama_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )


@pytest.fixture
def reward_model(reward_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir)
    )


def sampling_worker_env(settings, tmp_path) -> dict[str, str]:
    """A sampling worker's environment: a training worker's (``worker_env``) and this test's corpus."""
    return worker_env(settings, tmp_path) | {
        "CORPUS_INDEX_DIR": str(settings.CORPUS_INDEX_DIR),
        "DEFAULT_CORPUS": settings.DEFAULT_CORPUS,
    }


def sample_on_a_worker(env: dict[str, str], run_id: int, seconds: float = 180) -> SamplingRun:
    """Run a real sampling worker with ``env`` until run ``run_id`` has finished (or the time is up); the
    run as stored then."""
    with running_worker(env, queues="sampling"):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not SamplingRun.objects.get(pk=run_id).is_finished:
            time.sleep(0.3)
    return SamplingRun.objects.get(pk=run_id)


def questions(count: int, split: str = Split.EVAL) -> list[Question]:
    texts = ["Who won the 2022 AFL Grand Final?", "What happened to the Crimean Bridge in October 2022?"]
    return [
        Question.objects.create(text=texts[i % 2] + f" ({i})", key=f"q{i}", dataset="demo", split=split)
        for i in range(count)
    ]


def cancel_at(episodes: int) -> Callable[[SamplingRun], None]:
    """A progress callback that sets the run's cancel flag, as the page does, once ``episodes`` are done
    (with ``core.progress.SAVE_EVERY_S`` 0 the job reads the flag right after each callback)."""

    def cancel(run: SamplingRun) -> None:
        if run.episodes_done >= episodes:
            SamplingRun.objects.filter(pk=run.pk).update(cancel_requested=True)

    return cancel


def sample(user, policy, reward_model=None, **settings) -> SamplingRun:
    request = SamplingRequest(
        policy=policy,
        reward_model=reward_model,
        questions=QuestionSet(dataset="demo", limit=10),
        settings=TINY | settings,
    )
    return run_sampling_job(request_sampling(user, request, queue=False).pk)


def test_every_input_is_checked_before_anything_is_created(alice, policy, reward_model):
    questions(1)
    cases = [
        ({"settings": {"n": 0}}, "n"),
        ({"settings": {"n": 65}}, "n"),
        ({"settings": {"temperature": "hot"}}, "temperature"),
        ({"settings": {"max_actions": 2.5}}, "max_actions"),
        ({"settings": {"max_actions": True}}, "max_actions"),
        ({"settings": {"beam": 3}}, "settings"),
        ({"settings": {"decline_threshold": 0.5}}, "decline_threshold"),  # no reward model to score
        ({"backend": "http://169.254.169.254/v1"}, "backend"),  # names only, never a URL
        ({"policy": reward_model}, "policy"),
        ({"reward_model": policy}, "reward_model"),
        ({"questions": QuestionSet()}, "questions"),
        ({"questions": QuestionSet(dataset="nowhere")}, "questions"),
        ({"questions": QuestionSet(split="test")}, "split"),
        ({"questions": QuestionSet(dataset="demo", limit=0)}, "limit"),
    ]
    for change, field in cases:
        values = {"policy": policy, "questions": QuestionSet(dataset="demo")} | change
        with pytest.raises(RunError) as refused:
            request_sampling(alice, SamplingRequest(**values), queue=False)
        assert refused.value.field == field, (change, refused.value)
    assert not SamplingRun.objects.exists()


def test_a_run_stores_every_sample_as_a_model_episode_scored_and_chosen(
    alice, freshwiki, policy, reward_model
):
    asked = questions(2)
    run = sample(alice, policy, reward_model)
    assert run.status == RunStatus.DONE, run.error
    assert run.episodes_done == run.episodes_total == 4 and run.percent == 100
    assert run.tokens_generated > 0 and run.tokens_per_second > 0
    assert run.metrics["questions"] == 2 and run.metrics["episodes"] == 4
    assert 0 <= run.metrics["invalid_action_rate"] <= 1
    samples = list(Sample.objects.filter(run=run).select_related("episode"))
    assert any(s.score is not None for s in samples) and any(s.score is None for s in samples)
    assert sorted((s.question_id, s.index) for s in samples) == sorted(
        (q.pk, i) for q in asked for i in range(2)
    )
    for s in samples:
        episode = s.episode
        assert episode.kind == EpisodeKind.MODEL and episode.user is None and episode.policy == "tiny-bc"
        assert episode.status == EpisodeStatus.FINISHED and episode.question_id == s.question_id
        actions = list(EpisodeAction.objects.filter(episode=episode))
        assert len(actions) == s.actions >= 1 and sum(not a.valid for a in actions) == s.invalid_actions
        assert {a.page_before for a in actions} <= set(PageSnapshot.objects.values_list("digest", flat=True))
        assert (s.score is None) == (episode.answer == "")  # every answer is scored, nothing else
    for question in asked:
        group = [s for s in samples if s.question_id == question.pk]
        answered = [s for s in group if s.score is not None]
        chosen = [s for s in group if s.chosen]
        if answered:
            assert chosen == [max(answered, key=lambda s: (s.score, -s.index))]
        else:
            assert not chosen


def test_samples_take_no_question_from_demonstrators(dana, freshwiki, policy, django_user_model):
    """Samples are the team's data, not a person's work: a sampled bc question is still handed out."""
    question = Question.objects.create(
        text="Who won the 2022 AFL Grand Final?", key="bc1", dataset="demo", split=Split.BC
    )
    researcher = make_user(django_user_model, "r", "researcher")
    run = sample(researcher, policy, n=1)
    assert run.status == RunStatus.DONE, run.error
    assert next_episode(dana).question == question


def test_the_same_seed_gives_the_same_samples(alice, freshwiki, policy):
    questions(1)
    runs = [sample(alice, policy, seed=seed, n=1) for seed in (7, 7, 8)]

    def commands(run: SamplingRun) -> list[list[str]]:
        return [
            list(s.episode.actions.order_by("index").values_list("command", flat=True))
            for s in run.samples.order_by("index").select_related("episode")
        ]

    assert commands(runs[0]) == commands(runs[1])
    assert commands(runs[0]) != commands(runs[2])


def test_a_threshold_above_every_score_declines_and_keeps_the_scores(alice, freshwiki, policy, reward_model):
    questions(2)
    run = sample(alice, policy, reward_model, decline_threshold=1e6)
    assert run.status == RunStatus.DONE, run.error
    scored = Sample.objects.filter(run=run, score__isnull=False)
    assert scored.exists() and not Sample.objects.filter(run=run, chosen=True).exists()
    assert all(s.declined for s in scored)
    assert (
        run.metrics["answered"] == 0
        and run.metrics["declined"] == scored.values("question").distinct().count()
    )


def test_cancel_queued_at_once_and_running_after_its_round(alice, freshwiki, policy, monkeypatch):
    questions(1)
    request = SamplingRequest(policy=policy, questions=QuestionSet(dataset="demo"), settings=TINY)
    queued = request_sampling(alice, request, queue=False)
    cancel_sampling(alice, queued)
    queued.refresh_from_db()
    assert queued.status == RunStatus.CANCELLED and run_sampling_job(queued.pk).status == RunStatus.CANCELLED

    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    running = request_sampling(alice, request, queue=False)
    running = run_sampling_job(running.pk, echo=cancel_at(0))  # read after the first round
    assert running.status == RunStatus.CANCELLED and running.finished_at is not None
    assert not Sample.objects.filter(run=running).exists()  # the unfinished question left nothing behind
    assert "Cancelled: kept 0 of 1 questions' samples; 1 unfinished question(s) dropped" in running.log


def test_a_cancel_after_a_chunks_last_round_keeps_the_whole_chunk(
    alice, freshwiki, policy, reward_model, monkeypatch, settings
):
    """Issue 23: the cancel check ran before the chunk was stored, so a run cancelled once its episodes
    had all ended kept nothing. Now the chunk is scored and stored; only the chunks not started are not."""
    asked = questions(4)
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    settings.SAMPLING_BATCH = 2  # n=1: two chunks of two questions
    request = SamplingRequest(
        policy=policy,
        reward_model=reward_model,
        questions=QuestionSet(dataset="demo"),
        settings=TINY | {"n": 1},
    )
    run = run_sampling_job(request_sampling(alice, request, queue=False).pk, echo=cancel_at(2))
    assert run.status == RunStatus.CANCELLED
    samples = list(Sample.objects.filter(run=run).select_related("episode"))
    assert sorted(s.question_id for s in samples) == [asked[0].pk, asked[1].pk]
    assert all((s.score is None) == (s.episode.answer == "") for s in samples)  # scored as usual
    assert run.episodes_done == run.metrics["episodes"] == 2 and run.metrics["questions"] == 2
    assert "Cancelled: kept 2 of 4 questions' samples; 0 unfinished question(s) dropped, 2 not started" in (
        run.log
    )

    settings.SAMPLING_BATCH = 8  # one chunk: the cancel comes after the run's last round
    run = run_sampling_job(request_sampling(alice, request, queue=False).pk, echo=cancel_at(4))
    assert run.status == RunStatus.DONE and Sample.objects.filter(run=run).count() == 4
    assert run.metrics["questions"] == 4 and "Cancelled" not in run.log
    assert "The cancel came after the last question was sampled: every sample is kept." in run.log


def seeded_request(seeded_llama_dir) -> SamplingRequest:
    """One sample of each demo question by the seeded tiny model, seed 4 (three of four episodes end at
    their first action, one browses on), at most 2 actions."""
    policy = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="seeded", base_model="random", path=str(seeded_llama_dir)
    )
    settings = TINY | {"n": 1, "seed": 4, "max_actions": 2}
    return SamplingRequest(policy=policy, questions=QuestionSet(dataset="demo"), settings=settings)


def test_a_cancel_mid_chunk_keeps_the_questions_whose_episodes_all_ended(
    alice, freshwiki, seeded_llama_dir, monkeypatch
):
    """With the seeded tiny model and seed 4, three of four episodes end at their first action and one
    browses on: a cancel read after that round keeps those three questions and drops the fourth."""
    questions(4)
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    request = seeded_request(seeded_llama_dir)
    run = run_sampling_job(request_sampling(alice, request, queue=False).pk, echo=cancel_at(0))
    assert run.status == RunStatus.CANCELLED
    samples = list(Sample.objects.filter(run=run).select_related("episode"))
    assert len(samples) == 3 and all(s.actions == 1 and s.episode.end_reason for s in samples)
    assert run.episodes_done == run.metrics["episodes"] == 3 and run.metrics["questions"] == 3
    assert "Cancelled: kept 3 of 4 questions' samples; 1 unfinished question(s) dropped, 0 not started" in (
        run.log
    )


def test_the_run_moves_while_it_works_and_stores_each_question_as_its_episodes_end(
    alice, freshwiki, seeded_llama_dir, monkeypatch
):
    """Issue 24: a run showed "0 of 8 episodes" for most of its time and its samples only at the end. With
    the seeded tiny model and seed 4, three of four episodes end at their first action and one browses
    on: tokens move within the first round, the actions taken (of at most how many) after it, a log line
    says what the round did, and the three finished questions are stored while the fourth browses."""
    questions(4)
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    monkeypatch.setattr("training.sampling.progress.LOG_EVERY_S", 0.0)
    request = seeded_request(seeded_llama_dir)
    seen = []

    def watch(run: SamplingRun) -> None:
        stored = Sample.objects.filter(run=run).count()
        seen.append((run.actions_done, run.actions_limit, run.episodes_done, stored, run.tokens_generated))

    run = run_sampling_job(request_sampling(alice, request, queue=False).pk, echo=watch)
    assert run.status == RunStatus.DONE, run.error
    assert any(tokens > 0 for actions, *_, tokens in seen if actions == 0)  # within the first round
    # After the first round: 4 actions taken of at most 5 (three episodes ended one action short of
    # 2), 3 episodes finished, and their 3 questions stored while the fourth browses on.
    assert (4, 5, 3, 3) in [snapshot[:4] for snapshot in seen]
    assert "round 1: 1 episode(s) browsing, 3 of 4 finished, 4 actions taken; 3 question(s) stored" in run.log
    assert "round 2: 0 episode(s) browsing, 4 of 4 finished, 5 actions taken; 4 question(s) stored" in run.log
    actions = sum(Sample.objects.filter(run=run).values_list("actions", flat=True))
    assert run.actions_done == run.actions_limit == actions == 5 and run.percent == 100
    assert run.estimated_end_at is None  # an estimate only while it runs


def test_a_worker_that_died_leaves_the_run_failed_with_the_reason(alice, freshwiki, policy):
    questions(1)
    run = request_sampling(
        alice, SamplingRequest(policy=policy, questions=QuestionSet(dataset="demo")), queue=False
    )
    SamplingRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)  # as the dead worker left it
    run = run_sampling_job(run.pk)  # the redelivered message
    assert run.status == RunStatus.FAILED and "worker" in run.error


def test_an_unreachable_endpoint_fails_the_run_with_the_reason(alice, freshwiki, settings):
    with refused_port() as port:  # bound here, never listening: nobody can listen on it meanwhile
        settings.SAMPLING_ENDPOINTS = {
            "gpu": EndpointConfig("gpu", f"http://127.0.0.1:{port}/v1", "smollm2", max_retries=0, timeout_s=2)
        }
        questions(1)
        request = SamplingRequest(backend="gpu", questions=QuestionSet(dataset="demo"), settings=TINY)
        run = run_sampling_job(request_sampling(alice, request, queue=False).pk)
    assert run.status == RunStatus.FAILED and "127.0.0.1" in run.error
    assert run.policy_name == "gpu:smollm2"


def test_a_model_in_use_by_a_sampling_run_is_not_deleted(alice, policy, reward_model):
    questions(1)
    request = SamplingRequest(policy=policy, reward_model=reward_model, questions=QuestionSet(dataset="demo"))
    run = request_sampling(alice, request, queue=False)
    for model in (policy, reward_model):
        with pytest.raises(RunError, match="in use"):
            delete_checkpoint(alice, model)
    SamplingRun.objects.filter(pk=run.pk).update(status=RunStatus.DONE)
    delete_checkpoint(alice, reward_model)
    run.refresh_from_db()
    assert run.reward_model is None and run.reward_model_name == "tiny-rm"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_run_reaches_done_on_a_real_worker_on_the_sampling_queue(
    settings, tmp_path, alice, freshwiki, policy, reward_model, broker_namespace, model_store
):
    questions(1)
    request = SamplingRequest(
        policy=policy, reward_model=reward_model, questions=QuestionSet(dataset="demo"), settings=TINY
    )
    run = request_sampling(alice, request)  # queued on commit (no transaction wraps this test)
    run = sample_on_a_worker(sampling_worker_env(settings, tmp_path), run.pk)
    assert run.status == RunStatus.DONE, run.error
    assert Sample.objects.filter(run=run).count() == 2 and run.episodes_done == 2


def test_a_run_can_browse_the_live_web_through_a_provider(alice, freshwiki, policy, fake_web):
    """The same run on SearXNG: episodes record their provider, and their first search asked the API."""
    questions(1)
    request = SamplingRequest(
        policy=policy,
        search="searxng",
        questions=QuestionSet(dataset="demo", limit=1),
        settings=TINY | {"n": 1, "constrain_commands": True},
    )
    run = run_sampling_job(request_sampling(alice, request, queue=False).pk)
    assert run.status == RunStatus.DONE, run.error
    assert (run.search, run.corpus) == ("searxng", "")
    episode = Sample.objects.get(run=run).episode
    assert (episode.search, episode.corpus) == ("searxng", "")
    first = EpisodeAction.objects.filter(episode=episode).order_by("index").first()
    assert first.command.startswith("Search ") and fake_web.count("/searxng/search") >= 1
    with pytest.raises(RunError, match="leave it empty"):
        request_sampling(
            alice, SamplingRequest(policy=policy, search="searxng", corpus="freshwiki"), queue=False
        )


def guided(user, policy, reward_model, step_model, guide_k: int = 3) -> SamplingRun:
    """A finished run of the "demo" questions, each sampled unguided and guided by ``step_model``."""
    request = SamplingRequest(
        policy=policy,
        reward_model=reward_model,
        step_model=step_model,
        questions=QuestionSet(dataset="demo", limit=10),
        settings=TINY | {"guide_k": guide_k},
    )
    run = run_sampling_job(request_sampling(user, request, queue=False).pk)
    assert run.status == RunStatus.DONE, run.error
    return run


@pytest.fixture
def step_model(tiny_bert_dir, tmp_path) -> ModelCheckpoint:
    folder = tiny_reward_model(tmp_path / "prm", tiny_bert_dir, offset=0.0, max_length=64, kind="prm")
    return ModelCheckpoint.objects.create(
        kind=RunKind.PRM, name="tiny-prm", base_model="random", path=str(folder)
    )


def test_a_guided_run_samples_each_question_guided_and_unguided_and_reports_both(
    alice, freshwiki, policy, reward_model, step_model, client_for
):
    """Issue 38: with a step model, each question's n unguided samples (the baseline, indexes 0..n-1) are
    followed by n guided ones (n..2n-1, each step the best of guide_k commands by the PRM, the first drawn
    with the unguided twin's seed); best-of-n chooses among the guided; the run reports both arms."""
    asked = questions(2)
    everything = QuestionSet(dataset="demo")
    for wrong, field in (
        ({"settings": {"guide_k": 3}}, "guide_k"),  # commands per step without a model to choose
        ({"step_model": reward_model}, "step_model"),  # a reward model is not a step model
    ):
        with pytest.raises(RunError) as refused:
            request_sampling(
                alice, SamplingRequest(policy=policy, questions=everything, **wrong), queue=False
            )
        assert refused.value.field == field
    run = guided(alice, policy, reward_model, step_model)
    assert run.episodes_done == run.episodes_total == 8 and run.step_model_name == "tiny-prm"
    samples = list(Sample.objects.filter(run=run))
    assert sorted((s.question_id, s.index, s.guided) for s in samples) == sorted(
        (q.pk, i, i >= 2) for q in asked for i in range(4)
    )
    assert all(s.step_score is not None for s in samples if s.actions)
    assert not any(s.chosen for s in samples if not s.guided)  # the run's answers are the guided ones
    assert run.metrics["questions"] == 2 and run.metrics["episodes"] == 8
    arms = run.metrics["arms"]
    assert arms["unguided"]["episodes"] == arms["guided"]["episodes"] == 4
    for arm in arms.values():
        assert 0 <= arm["valid_action_rate"] <= 1 and arm["mean_step_score"] is not None
    # The guided steps take the PRM's best of 3: their mean step score is above the unguided ones'.
    assert arms["guided"]["mean_step_score"] > arms["unguided"]["mean_step_score"]
    assert "unguided and guided (best of 3 commands a step)" in run.log
    page = client_for(alice).get(f"/console/training/sampling/{run.pk}/").content.decode()
    assert "Guided against unguided" in page and "Guided by the step model" in page and "tiny-prm" in page
