"""axe-core (WCAG 2.2 A/AA and best practices) on every work page, each reached the way its user reaches it:
the demonstrator's browsing and answer steps, every feedback task template and rating preset, and the
researcher console with something on each page (judgements, an export, a trained run, a sampling run on tiny
models, a round). A test fails on any serious or critical violation; the message lists them all, by page."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from annotation.models import Assignment, AssignmentStatus, ExportFormat, FeedbackBatch
from tests.conftest import demo_production_batches, make_user
from tests.e2e.axe import describe, run_axe
from tests.e2e.test_demonstration import SELECT_SENTENCE
from tests.e2e.test_feedback import only
from tests.test_training_jobs import finished_export
from tests.test_training_pages import checkpoint_of, finished_rm_run
from tests.tiny_models import tiny_reward_model
from training.evaluation.benchmark_jobs import run_benchmark_job
from training.evaluation.benchmark_runs import BenchmarkRequest, request_benchmark
from training.evaluation.experiment_service import create_experiment
from training.evaluation.experiments import PolicyKey
from training.evaluation.rounds import create_round
from training.models import ModelCheckpoint, RunKind, RunStatus
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
TEMPLATES = [
    ("webgpt_comparison", ""),
    ("minimal_comparison", ""),
    ("ranking", ""),
    ("rating", "gophercite"),
    ("rating", "truthfulqa"),
    ("rating", "webglm"),
]


def follow(link: Locator) -> None:
    """Click a link and wait for the page it opens: axe run while the old page unloads finds no document."""
    with link.page.expect_navigation():
        link.click()


class Audit:
    """axe on each page a test passes through; one assert at the end names every page that failed."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.failures: dict[str, str] = {}

    def check(self, name: str) -> None:
        violations = run_axe(self.page)
        if violations:
            self.failures[f"{name} ({self.page.url})"] = describe(violations)

    def assert_clean(self) -> None:
        report = "\n\n".join(f"{name}:\n{text}" for name, text in self.failures.items())
        assert not self.failures, f"axe-core found serious or critical violations on\n{report}"


def sign_in(page: Page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_axe_reports_a_button_without_a_name(demo_site, page):
    """The check itself works: the login page passes, and a nameless button added to it is reported."""
    page.goto("/accounts/login/")
    assert run_axe(page) == []
    page.evaluate("document.getElementById('main').append(document.createElement('button'))")
    violations = run_axe(page)
    assert [(v["id"], v["impact"]) for v in violations] == [("button-name", "critical")]
    assert "button-name" in describe(violations) and "dequeuniversity.com" in describe(violations)


def test_the_demonstrator_pages(demo_site, page):
    audit = Audit(page)
    page.goto("/accounts/login/")
    audit.check("login")
    sign_in(page, "demonstrator", "demonstrator")
    expect(page.get_by_role("heading", level=1)).to_have_text("Next question")
    audit.check("demonstration landing")
    follow(page.get_by_role("link", name="instructions"))
    audit.check("instructions")
    page.go_back()
    page.get_by_role("button", name="Start next question").click()
    expect(page.get_by_label("Search query")).to_be_visible()
    audit.check("browsing page, before a search")
    page.get_by_label("Search query").fill("AFL Grand Final 2022")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#page-title")).to_have_text("Search results for: AFL Grand Final 2022")
    audit.check("browsing page, search results")
    page.get_by_role("link", name="2022 AFL Grand Final", exact=True).click()
    expect(page.locator("#page-title")).to_have_text("2022 AFL Grand Final (en.wikipedia.org)")
    audit.check("browsing page, a page opened")
    assert page.evaluate(SELECT_SENTENCE, "Geelong")
    page.get_by_role("button", name="Quote").click()
    expect(page.locator(".quotes blockquote")).to_have_count(1)
    audit.check("browsing page, with a quote")
    page.get_by_role("button", name="End: Answer").click()
    expect(page.get_by_label("Answer")).to_be_visible()
    audit.check("answer step")
    page.get_by_label("Answer").fill("Geelong won [1].")
    page.get_by_role("button", name="Submit answer").click()
    expect(page.get_by_role("status")).to_contain_text("Answer submitted")
    audit.check("demonstration landing, after an answer")
    follow(page.get_by_role("link", name="All your demonstrations"))
    audit.check("history")
    audit.assert_clean()


def test_the_labeler_pages_for_every_template_and_preset(demo_site, page):
    FeedbackBatch.objects.update(required_probability=0.0)
    audit = Audit(page)
    sign_in(page, "labeler", "labeler")
    expect(page.get_by_role("heading", level=1)).to_have_text("Next task")
    audit.check("tasks landing")
    for template, preset in TEMPLATES:
        only(template, preset)
        page.get_by_role("link", name="Feedback tasks").click()
        page.get_by_role("button", name="Start next task").click()
        expect(page.locator("#task-form")).to_be_visible()
        page.wait_for_load_state("load")  # tasks.js has drawn the answers and their controls
        audit.check(f"task: {template} {preset}".strip())
        guidelines = page.get_by_role("link", name="Guidelines").first.get_attribute("href")
        page.get_by_text("Skip this task").click()  # the next template's task, not this one again
        page.get_by_label("Why?").fill("checking accessibility")
        page.get_by_role("button", name="Skip task").click()
        expect(page.locator(".messages")).to_be_visible()
        page.goto(guidelines)  # the link opens a new tab: the same page
        audit.check(f"guidelines: {template} {preset}".strip())
    audit.assert_clean()


def judgements(batch: FeedbackBatch, count: int, django_user_model) -> None:
    """Submitted comparisons by two labelers, for a results page with figures on it."""
    now = timezone.now()
    labelers = [make_user(django_user_model, name, "labeler") for name in ("lena", "liam")]
    for number, item in enumerate(batch.items.all()[:count]):
        for labeler, overall in zip(labelers, ("a_better", "equal"), strict=True):
            Assignment.objects.create(
                item=item,
                labeler=labeler,
                order=list(item.answers.order_by("pk").values_list("pk", flat=True)),
                status=AssignmentStatus.SUBMITTED,
                response={"ratings": {"overall": overall if number % 2 else "b_better"}, "answers": {}},
                leased_until=now + timedelta(hours=1),
                submitted_at=now,
            )


@pytest.fixture
def console_world(
    demo_data, settings, tmp_path, model_store, tiny_llama_dir, tiny_bert_dir, django_user_model
):
    """Something on every console page: judgements, a finished export and reward-model run with its model,
    a sampling run of a tiny policy on two FreshWiki questions (run in-process: the page is the subject
    here, test_sampling.py covers the worker), and a round with the run."""
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = django_user_model.objects.get(username="researcher")
    comparison = demo_production_batches().get(template="webgpt_comparison")
    judgements(comparison, 4, django_user_model)
    export = finished_export(researcher, ExportFormat.RM_PAIRS, [{"chosen": "a", "rejected": "b"}])
    run = finished_rm_run(researcher, log="12:00:01 1 row from export\n")
    checkpoint_of(run, str(model_store / "rm"))
    policy = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )
    reward_dir = tiny_reward_model(tmp_path / "tiny-rm", tiny_bert_dir, offset=0.25, max_length=64)
    reward_model = ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir)
    )
    request = SamplingRequest(
        policy=policy,
        reward_model=reward_model,
        questions=QuestionSet(dataset="freshwiki_demo", limit=2),
        settings={"n": 2, "max_actions": 3, "max_answer_tokens": 16, "examples": 0}
        | {"constrain_commands": True, "seed": 1},
    )
    sampling = run_sampling_job(request_sampling(researcher, request, queue=False).pk)
    assert sampling.status == RunStatus.DONE, sampling.error
    create_round(researcher, "first round", "", [sampling.pk])
    # The same policy on two of the demo's TriviaQA eval questions, and a report of it.
    asked = BenchmarkRequest("triviaqa", replace(request, questions=QuestionSet()), limit=2)
    benchmark = run_benchmark_job(request_benchmark(researcher, asked, queue=False).pk)
    assert benchmark.status == RunStatus.DONE, benchmark.error
    report = create_experiment(researcher, "Tiny policy", [PolicyKey.of(sampling)])
    return {
        "comparison": comparison, "export": export, "training": run, "sampling": sampling,
        "benchmark": benchmark, "report": report,
    }  # fmt: skip


def test_the_researcher_console_pages(console_world, page):
    audit = Audit(page)
    sign_in(page, "researcher", "researcher")
    expect(page.get_by_role("heading", level=1)).to_have_text("Researcher console")
    audit.check("console home")
    page.get_by_role("button", name="Check workers").click()
    expect(page.locator("#worker-status")).to_contain_text("waiting")
    audit.check("console home, workers checked")
    nav = page.get_by_role("navigation", name="Main")
    for link in ("Questions", "Demos", "Feedback", "Workforce", "Exports", "Training"):
        follow(nav.get_by_role("link", name=link, exact=True))
        audit.check(link)
    for path in (
        "/console/workforce/candidates/webgpt_comparison/",
        "/console/workforce/kinds/webgpt_comparison/",
        "/console/team/",
        "/console/workforce/timesheets/",
    ):
        page.goto(path)
        audit.check(path)
    batch = console_world["comparison"]
    page.goto(f"/console/feedback/{batch.pk}/")
    audit.check("feedback batch")
    page.goto(f"/console/feedback/{batch.pk}/flags/")
    audit.check("flag review")
    page.goto(f"/console/feedback/{batch.pk}/results/")
    expect(page.get_by_role("heading", name="Preference", exact=True)).to_be_visible()
    audit.check("feedback batch results")
    page.goto(f"/console/exports/{console_world['export'].pk}/")
    audit.check("export")
    follow(page.get_by_role("link", name="Train a model on it"))
    audit.check("new training run (from an export)")
    page.goto(f"/console/training/{console_world['training'].pk}/")
    audit.check("training run")
    page.goto("/console/training/models/")
    audit.check("model registry")
    page.goto(f"/console/training/compare/?run={console_world['training'].pk}")
    audit.check("compare runs")
    follow(nav.get_by_role("link", name="Sampling", exact=True))
    audit.check("sampling runs")
    sampling = console_world["sampling"]
    page.goto(f"/console/training/sampling/{sampling.pk}/")
    expect(page.get_by_role("heading", name=f"Sampling run {sampling.pk}")).to_be_visible()
    audit.check("sampling run")
    page.get_by_role("link", name="trajectory").first.click()
    expect(page.get_by_text("Model sample", exact=False)).to_be_visible()
    audit.check("a sample's trajectory")
    page.goto("/console/training/sampling/new/")
    audit.check("new sampling run")
    page.goto("/console/training/sampling/")
    follow(page.get_by_role("link", name="Benchmarks"))
    audit.check("benchmark runs")
    follow(page.get_by_role("link", name="Run a benchmark"))
    audit.check("new benchmark run")
    page.goto(f"/console/training/benchmarks/{console_world['benchmark'].pk}/")
    expect(page.get_by_role("heading", name="Scores")).to_be_visible()
    audit.check("benchmark run")
    page.goto("/console/training/benchmarks/")
    follow(page.get_by_role("link", name="Experiment reports"))
    audit.check("experiment reports")
    page.get_by_role("link", name="Tiny policy").click()
    expect(page.get_by_role("heading", name="tiny-bc best-of-2 (tiny-rm)")).to_be_visible()
    audit.check("experiment report")
    follow(nav.get_by_role("link", name="Rounds", exact=True))
    audit.check("rounds")
    page.get_by_role("link", name="round 1").first.click()
    expect(page.get_by_role("heading", name="round 1: first round")).to_be_visible()
    audit.check("round")
    follow(page.get_by_role("banner").get_by_role("link", name="API token"))
    audit.check("API token")
    audit.assert_clean()
