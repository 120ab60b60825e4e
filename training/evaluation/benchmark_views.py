"""Researcher pages for benchmark runs: the runs with their headline scores, "Run a benchmark" (a policy and
its sampling settings on TriviaQA or TruthfulQA), and a run's live progress (its stage, its sampling run's
progress) and scores, each question's answer one click from its episode. Runs are jobs on the ``sampling``
queue; these pages only read their rows and ask training.evaluation.benchmark_runs to start or cancel."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.models import Question
from core.permissions import Role, get_visible_or_404, role_required
from training.evaluation.benchmark_forms import BenchmarkForm
from training.evaluation.benchmark_runs import cancel_benchmark, request_benchmark
from training.evaluation.benchmark_scores import TRUTHFULQA_RATES, results_of
from training.job_views import PAGE_SIZE, announce_request, cancel_unless_finished
from training.models import Benchmark, BenchmarkRun, Sample

TRIVIAQA_MEASURES = (("exact_match", "Exact match"), ("f1", "F1"), ("contains", "Names an alias"))


def headline(run: BenchmarkRun) -> dict[str, Any] | None:
    """The number a list shows: TriviaQA's exact match, TruthfulQA's judged truthful-and-informative rate."""
    results = run.results or {}
    if run.benchmark == Benchmark.TRIVIAQA:
        return results.get("exact_match") and {"label": "Exact match", **results["exact_match"]}
    judged = (results.get("judge") or {}).get("rates", {}).get("truthful_informative")
    return judged and {"label": "Truthful and informative (judge)", **judged}


@require_GET
@role_required(Role.RESEARCHER)
def benchmark_list(request: HttpRequest) -> HttpResponse:
    runs = BenchmarkRun.objects.select_related("owner", "sampling_run").defer("log")
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(run, headline(run)) for run in page]
    return render(request, "training/benchmarks.html", {"page": page, "rows": rows})


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def benchmark_new(request: HttpRequest) -> HttpResponse:
    initial = BenchmarkForm.prefill(request.GET, request.user)
    form = BenchmarkForm(request.POST or None, user=request.user, initial=initial)
    run = None
    if request.method == "POST" and form.is_valid():
        run = form.start(lambda: request_benchmark(request.user, form.benchmark_request()))
    if run is not None:
        announce_request(request, run, "Benchmark run")
        return redirect("training:benchmark", pk=run.pk)
    status = 400 if form.errors else 200
    return render(request, "training/benchmark_new.html", {"form": form}, status=status)


@require_GET
@login_required  # visibility decides: for anyone but researchers a run does not exist (404)
@vary_on_headers("HX-Request")
def benchmark_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(
        BenchmarkRun.objects.select_related("owner", "sampling_run", "batch", "judge_run"),
        request.user,
        pk=pk,
    )
    context: dict[str, Any] = {"run": run, "answers": run.sampling_run}
    if run.status == "done":
        results = results_of(run)
        context["results"] = results
        if run.benchmark == Benchmark.TRIVIAQA:
            context["measures"] = [
                {"label": label, **results[code]} for code, label in TRIVIAQA_MEASURES if code in results
            ]
            context["questions"] = question_rows(results.get("per_question", []))
        else:
            context["rates"] = rate_rows(results)
    template = "training/_benchmark_status.html" if request.htmx else "training/benchmark_detail.html"
    return render(request, template, context)


def question_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question of a TriviaQA run with its text, its answer's episode and its measures."""
    texts = dict(Question.objects.filter(pk__in=[r["question"] for r in rows]).values_list("pk", "text"))
    samples = {
        sample.pk: sample
        for sample in Sample.objects.filter(pk__in=[r["sample"] for r in rows if r["sample"]]).select_related(
            "episode"
        )
    }
    return [
        row | {"text": texts.get(row["question"], ""), "sample_row": samples.get(row["sample"])}
        for row in rows
    ]


def rate_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """TruthfulQA's three rates, the judge's and the people's side by side."""
    judge = (results.get("judge") or {}).get("rates", {})
    people = (results.get("people") or {}).get("rates", {})
    return [
        {"label": rate.label, "judge": judge.get(rate.code), "people": people.get(rate.code)}
        for rate in TRUTHFULQA_RATES
    ]


@require_POST
@login_required
def benchmark_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(
        BenchmarkRun.objects.select_related("sampling_run", "judge_run"), request.user, pk=pk
    )
    cancel_unless_finished(request, run, "Benchmark run", cancel_benchmark)
    return redirect("training:benchmark", pk=run.pk)
