"""The sampling pages: Sample answers (the service's refusal on the field it names, nothing created; a valid
request queued and shown), a finished run's page with its samples, scores and choices (from a real job on
tiny models), the htmx partial while a run works, cancel, who may see them, and a model sample's episode
page (its policy and run, every text escaped)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation.models import Episode, EpisodeKind, Question, Split
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, RunStatus, Sample, SamplingRun
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import DEFAULTS, PROMPTED_DEFAULT, QuestionSet, SamplingRequest, request_sampling
from training.sampling.views import coverage_curve

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("model_store")]
TINY = {"n": 2, "max_actions": 3, "max_answer_tokens": 16, "examples": 0}
NASTY = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, offset=0.25, max_length=64)


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


def ask(count: int = 1, text: str = "Who won the 2022 AFL Grand Final?") -> list[Question]:
    return [
        Question.objects.create(text=f"{text} ({i})", key=f"q{i}", dataset="demo", split=Split.EVAL)
        for i in range(count)
    ]


def form_data(**changes) -> dict:
    # The form as a person fills it: guide_k only with a step model (alone it is refused, not ignored).
    values = {name: value for name, value in DEFAULTS.items() if value is not None and name != "guide_k"}
    values |= {"backend": "local", "dataset": "demo", "constrain_commands": ""} | TINY
    return {name: value for name, value in (values | changes).items() if value is not None}


def finished_run(user, policy, reward_model, **settings) -> SamplingRun:
    request = SamplingRequest(
        policy=policy,
        reward_model=reward_model,
        questions=QuestionSet(dataset="demo"),
        settings=TINY | settings,
    )
    run = run_sampling_job(request_sampling(user, request, queue=False).pk)
    assert run.status == RunStatus.DONE, run.error
    return run


def test_a_refusal_lands_on_its_field_and_creates_nothing(client_for, alice, policy, reward_model):
    ask()
    client = client_for(alice)
    url = reverse("training:sampling_new")
    cases = [
        ({"n": 65}, "n", "Must be between 1 and 64."),
        ({"max_actions": 0}, "max_actions", "Must be between 1 and 100."),
        ({"decline_threshold": 0.5}, "decline_threshold", "Declining below a threshold needs a reward model"),
        ({"dataset": "", "split": ""}, None, "Questions: choose the questions"),
    ]
    for change, field, message in cases:
        response = client.post(url, form_data(policy=policy.pk, **change))
        assert response.status_code == 400, change
        form = response.context["form"]
        errors = form.errors.get(field or "__all__", [])
        assert any(message in error for error in errors), (change, form.errors)
        assert message in response.content.decode()
    assert not SamplingRun.objects.exists()


def test_a_valid_request_queues_a_run_and_redirects_to_its_page(
    client_for, alice, policy, reward_model, django_capture_on_commit_callbacks
):
    asked = ask(2)
    client = client_for(alice)
    data = form_data(policy=policy.pk, reward_model=reward_model.pk, limit=1, constrain_commands="on")
    response = client.post(reverse("training:sampling_new"), data)
    run = SamplingRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("training:sampling_run", args=[run.pk])
    assert run.owner == alice and run.policy == policy and run.reward_model == reward_model and run.n == 2
    assert run.question_ids == [asked[0].pk] and run.settings["constrain_commands"] is True
    page = client.get(response.url).content.decode()
    assert "Queued" in page and "waiting for a worker on the <code>sampling</code> queue" in page
    assert 'hx-trigger="every 2s"' in page and "Cancel run" in page


def test_links_prefill_the_form(client_for, alice, policy, reward_model):
    ask()
    client = client_for(alice)
    registry = client.get(reverse("training:models")).content.decode()
    new = reverse("training:sampling_new")
    assert f"{new}?policy={policy.pk}" in registry and f"{new}?reward_model={reward_model.pk}" in registry
    page = client.get(f"{new}?reward_model={reward_model.pk}&dataset=demo&n=2&max_actions=10&limit=4&seed=x")
    form = page.context["form"]
    assert page.status_code == 200 and not form.is_bound
    assert form.initial["reward_model"] == reward_model.pk and form.initial["dataset"] == "demo"
    assert (form.initial["n"], form.initial["max_actions"], form.initial["limit"]) == (2, 10, 4)
    assert form.initial["seed"] == DEFAULTS["seed"]  # not a number: the default stays
    assert "SmolLM2-135M-Instruct, prompted (default)" in page.content.decode()


def test_the_quick_start_link_prefills_a_small_run_on_the_demo_questions(client_for, alice, reward_model):
    client = client_for(alice)
    unscored = client.get(reverse("training:sampling_runs")).content.decode()
    assert "unscored (no reward model is registered yet)" not in unscored  # one is registered
    Question.objects.create(text="Who won the 2022 AFL Grand Final?", key="fw0", dataset="freshwiki_demo")
    newer = ModelCheckpoint.objects.create(kind=RunKind.RM, name="newer-rm", base_model="x", path="/x")
    listing = client.get(reverse("training:sampling_runs"))
    link = listing.context["quick_start"]["query"]
    assert f"scored by {newer.name}" in listing.content.decode()
    form = client.get(f"{reverse('training:sampling_new')}?{link}").context["form"]
    assert form.initial["dataset"] == "freshwiki_demo" and form.initial["reward_model"] == newer.pk
    assert (form.initial["n"], form.initial["limit"], form.initial["max_actions"]) == (2, 4, 10)
    assert form.initial.get("policy") is None  # the prompted default


def test_a_finished_run_shows_its_samples_scores_and_choices(
    client_for, alice, freshwiki, policy, reward_model
):
    ask(1)
    # Commands held to the grammar, seed 1: the random tiny policy quotes, so some samples are scored.
    run = finished_run(alice, policy, reward_model, constrain_commands=True, seed=1)
    samples = list(Sample.objects.filter(run=run).select_related("episode"))
    assert len(samples) == 2
    page = client_for(alice).get(reverse("training:sampling_run", args=[run.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and "Done" in html and 'value="100"' in html
    assert 'hx-trigger="every 2s"' not in html and "Cancel run" not in html
    assert "2 of 2 episodes" in html and "Invalid-action rate" in html
    # Every action's request held to the command grammar by the local backend, and all valid.
    assert "Valid actions on local" in html and "<td>commands (local)</td>" in html
    assert run.metrics["constraints"] == {
        "commands (local)": {"actions": run.metrics["actions"], "valid": run.metrics["actions"]}
    }
    for sample in samples:
        assert reverse("annotation:episode", args=[sample.episode_id]) in html
        if sample.score is not None:
            assert f"{sample.score:.3f}" in html
    assert any(sample.chosen for sample in samples)
    assert html.count('run-done">chosen') == sum(sample.chosen for sample in samples)
    assert "<svg" in html and "decline threshold" in html  # the coverage chart
    for question in Question.objects.all():
        assert question.text in html
    listing = client_for(alice).get(reverse("training:sampling_runs")).content.decode()
    assert reverse("training:sampling_run", args=[run.pk]) in listing and "tiny-bc" in listing


def test_the_htmx_partial_polls_while_running_and_shows_the_progress(client_for, alice):
    """Issue 24: the moving figure is the actions taken (of at most how many), with the episodes finished
    beside it and the time left at the rate so far."""
    run = SamplingRun.objects.create(
        owner=alice,
        policy_name="tiny",
        n=2,
        status=RunStatus.RUNNING,
        question_ids=[1, 2, 3, 4],
        episodes_done=3,
        episodes_total=8,
        actions_done=12,
        actions_limit=32,
        tokens_per_second=12.34,
        estimated_end_at=timezone.now() + timedelta(minutes=3, seconds=30),
    )
    response = client_for(alice).get(reverse("training:sampling_run", args=[run.pk]), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert 'hx-trigger="every 2s"' in html and 'value="37"' in html
    assert "12 actions taken of at most 32 · 3 of 8 episodes finished" in html and "about 4 min left" in html
    assert "12.3" in html and "0 of 4 questions so far" in html


def test_samples_show_while_the_run_works(client_for, alice, freshwiki, policy, reward_model, monkeypatch):
    """Issue 24: samples showed only once the run had ended. While it works, the page shows the questions
    stored last (each is stored as soon as its n episodes end), and says how many are stored."""
    ask(2)
    run = finished_run(alice, policy, reward_model)
    SamplingRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, finished_at=None)
    monkeypatch.setattr("training.sampling.views.LATEST_WHILE_RUNNING", 1)
    url = reverse("training:sampling_run", args=[run.pk])
    html = client_for(alice).get(url, HTTP_HX_REQUEST="true").content.decode()
    last = Sample.objects.filter(run=run).order_by("-pk").first()
    assert 'hx-trigger="every 2s"' in html and "2 of 2 questions so far, the latest 1 shown" in html
    assert html.count('class="question-samples"') == 1 and f'id="question-{last.question_id}"' in html
    assert all(f'id="sample-{s.pk}"' in html for s in Sample.objects.filter(question=last.question))


def test_the_prompted_default_says_to_expect_nonsense_and_what_to_use_instead(client_for, alice, policy):
    """Issue 24: SmolLM2-135M's answers are nonsense and nothing said to expect that."""
    client = client_for(alice)
    form = client.get(reverse("training:sampling_new")).content.decode()
    assert "Expect nonsense answers from the prompted SmolLM2-135M default" in form
    assert "a BC model trained on demonstrations, or an endpoint of SAMPLING_ENDPOINTS" in form
    prompted = SamplingRun.objects.create(owner=alice, policy_name=PROMPTED_DEFAULT, n=1, episodes_total=1)
    page = client.get(reverse("training:sampling_run", args=[prompted.pk])).content.decode()
    assert "Expect nonsense answers" in page and f"{reverse('training:new')}?kind=bc" in page
    assert "SAMPLING_ENDPOINTS" in page
    bc = SamplingRun.objects.create(owner=alice, policy=policy, policy_name="tiny-bc", n=1, episodes_total=1)
    assert (
        "Expect nonsense" not in client.get(reverse("training:sampling_run", args=[bc.pk])).content.decode()
    )


def test_the_banner_after_a_request_stays_true_once_the_run_is_done(client_for, alice, policy):
    """Issue 24: "Sampling run 2 queued..." stayed over the page after the polled status said Done."""
    ask()
    client = client_for(alice)
    response = client.post(reverse("training:sampling_new"), form_data(policy=policy.pk), follow=True)
    banners = [str(message) for message in response.context["messages"]]
    run = SamplingRun.objects.get()
    assert banners == [f"Sampling run {run.pk} requested: its status below follows it to the end."]
    assert "waiting for a worker on the <code>sampling</code> queue" in response.content.decode()


def test_cancel_a_queued_run(client_for, alice):
    run = SamplingRun.objects.create(owner=alice, policy_name="tiny", n=1, episodes_total=1)
    client = client_for(alice)
    response = client.post(reverse("training:sampling_cancel", args=[run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.cancel_requested
    assert f"Sampling run {run.pk}: cancel requested." in response.content.decode()
    again = client.post(reverse("training:sampling_cancel", args=[run.pk]), follow=True)
    assert "had already finished (cancelled)" in again.content.decode()
    assert client.get(reverse("training:sampling_cancel", args=[run.pk])).status_code == 405


def test_only_researchers_see_sampling_runs(client_for, alice, bob, dana, charlie):
    run = SamplingRun.objects.create(owner=alice, policy_name="tiny", n=1, episodes_total=1)
    for user in (bob, dana, charlie):
        client = client_for(user)
        assert client.get(reverse("training:sampling_runs")).status_code == 403
        assert client.get(reverse("training:sampling_new")).status_code == 403
        assert client.post(reverse("training:sampling_new"), form_data()).status_code == 403
        assert client.get(reverse("training:sampling_run", args=[run.pk])).status_code == 404
        assert client.post(reverse("training:sampling_cancel", args=[run.pk])).status_code == 404
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and not run.cancel_requested
    assert not SamplingRun.objects.exclude(pk=run.pk).exists()
    anonymous = client_for(None).get(reverse("training:sampling_runs"))
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))


def test_a_model_sample_page_names_its_policy_and_run_and_escapes_text(
    client_for, alice, dana, freshwiki, policy, reward_model
):
    ask(1, text=f"Is {NASTY} a question?")
    run = finished_run(alice, policy, reward_model, n=1)
    sample = Sample.objects.select_related("episode").get(run=run)
    episode = sample.episode
    Episode.objects.filter(pk=episode.pk).update(answer=f"An answer {NASTY}", policy=f"tiny {NASTY}")
    assert episode.kind == EpisodeKind.MODEL and episode.user is None
    page = client_for(alice).get(reverse("annotation:episode", args=[episode.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert NASTY not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "Model sample" in html and "by None" not in html
    assert reverse("training:sampling_run", args=[run.pk]) in html
    for command in episode.actions.values_list("command", flat=True):
        assert escape(command) in html
    # Demonstrators see only their own episodes: a model's sample is not theirs.
    assert client_for(dana).get(reverse("annotation:episode", args=[episode.pk])).status_code == 404
    # The run page escapes the same texts.
    run_page = client_for(alice).get(reverse("training:sampling_run", args=[run.pk])).content.decode()
    assert NASTY not in run_page and "An answer &lt;script&gt;" in run_page


def test_coverage_curve_mirrors_best_of_n():
    from training.sampling.best_of_n import coverage_curve as original

    scores, thresholds = [0.5, None, -1.0, 2.0], [3.0, -2.0, 0.5, 0.0]
    assert coverage_curve(scores, thresholds) == original(scores, thresholds)
    assert coverage_curve([], [0.0]) == original([], [0.0]) == [(0.0, 0.0)]


def test_the_form_offers_the_configured_providers_and_checks_the_source(client_for, alice, policy, fake_web):
    ask()
    client = client_for(alice)
    url = reverse("training:sampling_new")
    assert "SearXNG (live web)" in client.get(url).content.decode()
    response = client.post(url, form_data(policy=policy.pk, search="searxng", corpus="freshwiki"))
    assert response.status_code == 400 and "leave it empty for a live provider" in response.content.decode()
    assert response.context["form"].errors.get("corpus")
    response = client.post(url, form_data(policy=policy.pk, search="searxng"))
    run = SamplingRun.objects.get()
    assert response.status_code == 302 and (run.search, run.corpus) == ("searxng", "")
    assert "the live web with searxng" in client.get(response.url).content.decode()
