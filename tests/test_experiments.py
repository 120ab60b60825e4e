"""Experiment reports (issue 39): ``run_experiment`` runs an experiment file end to end on tiny models (three
policies on TriviaQA; the report's figures are the benchmark runs' own; the static HTML file with its
charts); a bad file names its place and creates nothing; the console makes a report from the UI, shows
it, and downloads it as CSV, JSON and HTML; the benchmark pages start a run and show its scores; outsiders
get 404 everywhere."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Question, Split
from training.models import BenchmarkRun, Experiment, ModelCheckpoint, RunKind, RunStatus, SamplingRun
from training.sampling.runs import PROMPTED_DEFAULT

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("model_store", "freshwiki")]

FILE = """
name = "Tiny policies on TriviaQA"
notes = "CPU, random weights"
questions = 2

[settings]
max_actions = 3
max_answer_tokens = 16
examples = 0
seed = 1
constrain_commands = true

[[policies]]
model = "tiny-bc"

[[policies]]
model = "tiny-bc"
n = 2
reward_model = "tiny-rm"

[[policies]]
model = "tiny-bc-copy"

[[benchmarks]]
name = "triviaqa"
"""


@pytest.fixture
def models(tiny_llama_dir, tiny_bert_dir, tmp_path):
    from tests.tiny_models import tiny_reward_model

    for name in ("tiny-bc", "tiny-bc-copy"):
        ModelCheckpoint.objects.create(
            kind=RunKind.BC, name=name, base_model="random", path=str(tiny_llama_dir)
        )
    reward = tiny_reward_model(tmp_path / "rm", tiny_bert_dir, offset=0.25, max_length=64)
    ModelCheckpoint.objects.create(kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward))
    for i in range(2):
        Question.objects.create(
            text=f"Which river flows through Vienna? ({i})",
            key=f"tq{i}",
            dataset="triviaqa",
            split=Split.EVAL,
            reference_answers=["Danube"],
        )


def run_file(tmp_path, text: str, *more: str) -> str:
    path = tmp_path / "experiment.toml"
    path.write_text(text)
    out = io.StringIO()
    call_command("run_experiment", str(path), *more, stdout=out)
    return out.getvalue()


def test_the_command_runs_every_policys_benchmark_and_makes_the_report(models, tmp_path):
    output = tmp_path / "report.html"
    printed = run_file(tmp_path, FILE, "--output", str(output))
    runs = list(BenchmarkRun.objects.order_by("pk"))
    assert len(runs) == 3 and all(run.status == RunStatus.DONE for run in runs)
    assert [(r.sampling_run.policy_name, r.sampling_run.n) for r in runs] == [
        ("tiny-bc", 1),
        ("tiny-bc", 2),
        ("tiny-bc-copy", 1),
    ]
    experiment = Experiment.objects.get()
    assert experiment.name == "Tiny policies on TriviaQA" and experiment.source.startswith("\nname =")
    assert f"report {experiment.pk}" in printed and "written to" in printed
    from training.evaluation.experiments import experiment_report

    report = experiment_report(experiment)
    assert [p["policy"] for p in report["policies"]] == [
        "tiny-bc best-of-1",
        "tiny-bc best-of-2 (tiny-rm)",
        "tiny-bc-copy best-of-1",
    ]
    for policy, run in zip(report["policies"], runs, strict=True):
        figures = {figure["label"]: figure for figure in policy["figures"]}
        exact = figures["TriviaQA exact match"]
        assert (exact["value"], exact["low"], exact["high"]) == tuple(
            run.results["exact_match"][k] for k in ("value", "low", "high")
        )
        assert exact["url"] == reverse("training:benchmark", args=[run.pk])
        assert policy["runs"] == [
            {"id": run.sampling_run_id, "url": reverse("training:sampling_run", args=[run.sampling_run_id])}
        ]
        assert policy["cost"]["questions"] == 2
        assert policy["cost"]["tokens_per_question"] == run.sampling_run.tokens_generated / 2
    html = output.read_text()
    assert html.startswith("<!doctype html>") and "Tiny policies on TriviaQA" in html
    assert "tiny-bc best-of-2 (tiny-rm)" in html and "<script" not in html


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'x'\n[[policies]]\nmodel = 'nope'\n[[benchmarks]]\nname = 'triviaqa'", "policies[1].model"),
        ("name = 'x'\n[[policies]]\nmodel = 'tiny-bc'\ncolour = 1", "unknown key 'colour'"),
        ("name = 'x'\n[[policies]]\nmodel = 'tiny-bc'\n[[benchmarks]]\nname = 'mmlu'", "benchmarks[1]"),
        (
            "name = 'x'\n[settings]\nmax_actions = 0\n[[policies]]\n[[benchmarks]]\nname = 'triviaqa'",
            "max_actions",
        ),
        ("name = 'x'\n[[policies]]\nmodel = 'tiny-bc'", "no finished sampling run of tiny-bc best-of-1"),
        ("name = ", "not TOML"),
    ],
)
def test_a_bad_file_names_its_place_and_creates_nothing(models, tmp_path, text, message):
    with pytest.raises(CommandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_file(tmp_path, text)
    assert not BenchmarkRun.objects.exists() and not SamplingRun.objects.exists()
    assert not Experiment.objects.exists()


def test_a_report_from_the_console_and_its_downloads(models, tmp_path, client_for, alice, bob):
    run_file(tmp_path, FILE)
    Experiment.objects.all().delete()
    client = client_for(alice)
    page = client.get(reverse("training:experiments"))
    choices = page.context["form"].fields["policies"].choices
    assert [label for _, label in choices] == [
        "tiny-bc best-of-1",
        "tiny-bc best-of-2 (tiny-rm)",
        "tiny-bc-copy best-of-1",
    ]
    refused = client.post(reverse("training:experiments"), {"name": "", "policies": []})
    assert refused.status_code == 400 and not Experiment.objects.exists()
    made = client.post(
        reverse("training:experiments"),
        {"name": "Three <b>policies</b>", "policies": [value for value, _ in choices]},
    )
    experiment = Experiment.objects.get()
    assert made.status_code == 302 and made.url == reverse("training:experiment", args=[experiment.pk])
    html = client.get(made.url).content.decode()
    assert "Three &lt;b&gt;policies&lt;/b&gt;" in html and "<svg" in html
    assert html.count("TriviaQA exact match") >= 3
    for run in BenchmarkRun.objects.all():
        assert reverse("training:benchmark", args=[run.pk]) in html
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("training:experiment_csv", args=[experiment.pk])).content.decode())
        )
    )
    assert {row["policy"] for row in rows} == {label for _, label in choices}
    assert sum(row["label"] == "TriviaQA F1" for row in rows) == 3
    report = json.loads(client.get(reverse("training:experiment_json", args=[experiment.pk])).content)
    assert report["experiment"]["name"] == "Three <b>policies</b>" and len(report["policies"]) == 3
    static = client.get(reverse("training:experiment_html", args=[experiment.pk]))
    assert (
        static["Content-Disposition"].endswith('.html"')
        and b"http://testserver/console/training/" in static.content
    )
    # The benchmark pages: the list with each run's score, a run's page with its questions.
    listed = client.get(reverse("training:benchmarks")).content.decode()
    assert listed.count("Exact match:") == 3
    run = BenchmarkRun.objects.first()
    detail = client.get(reverse("training:benchmark", args=[run.pk])).content.decode()
    assert "Which river flows through Vienna? (0)" in detail and "Names an alias" in detail
    # A labeler: none of it exists.
    outsider = client_for(bob)
    for name in ("experiment", "experiment_json", "experiment_csv", "experiment_html"):
        assert outsider.get(reverse(f"training:{name}", args=[experiment.pk])).status_code == 404
    assert outsider.get(reverse("training:benchmark", args=[run.pk])).status_code == 404


def test_the_benchmark_form_starts_a_run_and_names_a_refusal(
    models, client_for, alice, django_capture_on_commit_callbacks
):
    client = client_for(alice)
    policy = ModelCheckpoint.objects.get(name="tiny-bc")
    data = {
        "benchmark": "truthfulqa", "questions": 2, "policy": policy.pk, "backend": "local", "n": 1,
        "temperature": 0.8, "max_actions": 3, "max_answer_tokens": 16, "max_command_tokens": 48, "seed": 0,
        "examples": 0,
    }  # fmt: skip
    refused = client.post(reverse("training:benchmark_new"), data)
    assert refused.status_code == 400 and "Choose who judges TruthfulQA" in refused.content.decode()
    made = client.post(reverse("training:benchmark_new"), data | {"benchmark": "triviaqa"})
    run = BenchmarkRun.objects.get()
    assert made.status_code == 302 and made.url == reverse("training:benchmark", args=[run.pk])
    assert run.status == RunStatus.QUEUED and run.sampling_run.question_ids == list(
        Question.objects.order_by("pk").values_list("pk", flat=True)
    )
    page = client.get(made.url).content.decode()
    assert "Queued" in page and "Cancel run" in page
    client.post(reverse("training:benchmark_cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.sampling_run.status == RunStatus.CANCELLED


def test_benchmark_runs_and_reports_over_the_api(models, alice, bob):
    from tests.test_api import api
    from training.evaluation.benchmark_jobs import run_benchmark_job

    client = api(alice)
    policy = ModelCheckpoint.objects.get(name="tiny-bc")
    body = {
        "benchmark": "triviaqa", "limit": 2, "policy": policy.pk,
        "settings": {"n": 1, "max_actions": 3, "max_answer_tokens": 16, "examples": 0, "seed": 1},
    }  # fmt: skip
    refusals = [
        (body | {"benchmark": "mmlu"}, {"benchmark": ["expected one of triviaqa, truthfulqa"]}),
        (
            body | {"people": True},
            {"people": ["TriviaQA is scored against its answers' aliases: no judge, no people"]},
        ),
        (body | {"settings": {"n": 0}}, {"settings": {"n": ["must be between 1 and 64"]}}),
        (body | {"questions": {"dataset": "x"}}, None),  # the benchmark's eval split: no question set
    ]
    for given, expected in refusals:
        response = client.post("/api/benchmark-runs", given, format="json")
        assert response.status_code == 400, given
        assert expected is None or response.json() == expected, response.json()
    assert not BenchmarkRun.objects.exists() and not SamplingRun.objects.exists()
    response = client.post("/api/benchmark-runs", body, format="json")
    assert response.status_code == 202 and response.json()["status"] == "queued"
    run = run_benchmark_job(response.json()["id"])
    detail = client.get(f"/api/benchmark-runs/{run.pk}").json()
    assert detail["status"] == "done" and detail["results"]["questions"] == 2
    assert detail["results"]["exact_match"] == run.results["exact_match"]
    policies = client.get("/api/experiment-policies").json()
    assert policies == [
        {"policy_name": "tiny-bc", "n": 1, "reward_model_name": "", "label": "tiny-bc best-of-1"}
    ]
    made = client.post("/api/experiments", {"name": "API report", "policies": policies[:1]}, format="json")
    assert made.status_code == 201, made.json()
    unknown = {"policy_name": "nobody", "n": 1}
    refused = client.post("/api/experiments", {"name": "x", "policies": [unknown]}, format="json")
    assert refused.status_code == 400 and "no finished sampling run of nobody best-of-1" in str(
        refused.json()
    )
    report = client.get(f"/api/experiments/{made.json()['id']}").json()
    (only,) = report["policies"]
    assert [f["label"] for f in only["figures"]] == ["TriviaQA exact match", "TriviaQA F1"]
    outsider = api(bob)
    assert outsider.get(f"/api/experiments/{made.json()['id']}").status_code == 404
    assert outsider.get(f"/api/benchmark-runs/{run.pk}").status_code == 404
    assert outsider.get("/api/benchmark-runs").status_code == 403


def test_the_demo_report_queues_each_policys_benchmark_and_fills_in_as_they_finish(
    models, client_for, alice, django_capture_on_commit_callbacks
):
    client = client_for(alice)
    Question.objects.filter(dataset="triviaqa").update(split=Split.BC)
    refused = client.post(reverse("training:experiment_demo"), follow=True)
    assert "TriviaQA questions are not loaded" in refused.content.decode()
    assert not Experiment.objects.exists() and not BenchmarkRun.objects.exists()
    Question.objects.filter(dataset="triviaqa").update(split=Split.EVAL)
    with django_capture_on_commit_callbacks() as queued:
        made = client.post(reverse("training:experiment_demo"))
    experiment = Experiment.objects.get()
    assert made.url == reverse("training:experiment", args=[experiment.pk]) and len(queued) == 3
    runs = list(BenchmarkRun.objects.order_by("pk").select_related("sampling_run"))
    assert [
        (r.sampling_run.policy_name, r.sampling_run.n, r.sampling_run.reward_model_name) for r in runs
    ] == [
        (PROMPTED_DEFAULT, 1, ""),
        (PROMPTED_DEFAULT, 2, "tiny-rm"),
        ("tiny-bc-copy", 1, ""),  # the newest BC model
    ]
    assert all(r.status == RunStatus.QUEUED and r.sampling_run.question_ids for r in runs)
    page = client.get(made.url).content.decode()
    for run in runs:
        assert f"TriviaQA run {run.pk}</a> (queued)" in page
    assert "not which policy is better" in page
