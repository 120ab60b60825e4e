"""Researcher pages for the reward-model proxy evaluation of best-of-n (WebGPT Figures 5 and 8): the
evaluations with the form that asks for one, an evaluation's live progress and, once done, its curves
(validation score and implied preference over best-of-1 against k, with their 95% intervals) beside
their numbers, and the CSV of those numbers. Evaluations are jobs on the ``training`` queue; these
pages only read their rows and ask training.evaluation.proxy_jobs to start or cancel one."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from core.charts import UNIT
from core.permissions import Role, get_visible_or_404, role_required
from core.plot import DOTTED, Series, interval_chart
from training.evaluation.proxy_forms import ProxyEvaluationForm
from training.evaluation.proxy_jobs import cancel_proxy_evaluation, request_proxy_evaluation
from training.evaluation.reward_gap import reward_gaps
from training.job_views import PAGE_SIZE, announce_request, cancel_unless_finished
from training.models import ProxyEvaluation, RunStatus, SamplingRun

CSV_COLUMNS = (
    "evaluation",
    "validation_reward_model",
    "run",
    "policy",
    "run_reward_model",
    "n",
    "selection",
    "k",
    "questions",
    "mean_validation_score",
    "ci95_low",
    "ci95_high",
    "preference_over_k1",
    "preference_ci95_low",
    "preference_ci95_high",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run such a text cell


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def proxy_list(request: HttpRequest) -> HttpResponse:
    initial = ProxyEvaluationForm.prefill(request.GET, request.user)
    data = request.POST if request.method == "POST" else None
    form = ProxyEvaluationForm(data, user=request.user, initial=initial)
    evaluation = None
    if data is not None and form.is_valid():
        evaluation = form.start(lambda: request_proxy_evaluation(request.user, form.proxy_request()))
    if evaluation is not None:
        announce_request(request, evaluation, "Proxy evaluation")
        for warning in evaluation.settings.get("warnings", []):
            messages.warning(request, warning)
        return redirect("training:proxy_evaluation", pk=evaluation.pk)
    # The scores and curves grow with the samples: a list needs neither.
    evaluations = (
        ProxyEvaluation.objects.select_related("owner")
        .defer("scores", "results", "log")
        .prefetch_related(Prefetch("sampling_runs", queryset=SamplingRun.objects.only("pk").order_by("pk")))
    )
    page = Paginator(evaluations, PAGE_SIZE).get_page(request.GET.get("page"))
    status = 400 if form.errors else 200
    return render(request, "training/proxy_evaluations.html", {"page": page, "form": form}, status=status)


@require_GET
@login_required  # visibility decides: for anyone but researchers an evaluation does not exist (404)
@vary_on_headers("HX-Request")
def proxy_detail(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_visible_or_404(
        ProxyEvaluation.objects.select_related("owner", "reward_model"), request.user, pk=pk
    )
    curves = finished_curves(evaluation)
    context: dict[str, Any] = {
        "evaluation": evaluation,
        "curves": curves,
        "score_chart": score_chart(evaluation, curves),
        "preference_chart": preference_chart(evaluation, curves),
    }
    if request.htmx:
        return render(request, "training/proxy_status.html", context)
    context["runs"] = evaluation.sampling_runs.defer("log", "metrics", "question_ids").order_by("pk")
    context["warnings"] = evaluation.settings.get("warnings", [])
    return render(request, "training/proxy_detail.html", context)


def finished_curves(evaluation: ProxyEvaluation) -> list[dict[str, Any]]:
    """The per-run curves of a done evaluation, each with its label (none before it is done)."""
    if evaluation.status != RunStatus.DONE:
        return []
    curves = []
    found = (evaluation.results or {}).get("runs", [])
    gaps = reward_gaps(evaluation, [curve["run"] for curve in found])
    for curve in found:
        unscored = " (unscored: no selection)" if curve.get("selection") == "none" else ""
        short = f"run {curve['run']}, best-of-{curve.get('n')}{unscored}"  # a legend entry stays short
        label = f"run {curve['run']}: {curve.get('policy_name', '')}, best-of-{curve.get('n')}{unscored}"
        curves.append({**curve, "label": label, "short_label": short, "gap": gaps.get(curve["run"])})
    return curves


def score_chart(evaluation: ProxyEvaluation, curves: Sequence[dict[str, Any]]) -> SafeString:
    title = f"Proxy evaluation {evaluation.pk}: validation reward of best-of-k"
    return _chart(curves, ("mean", "low", "high"), title, "validation reward (mean, 95% interval)")


def preference_chart(evaluation: ProxyEvaluation, curves: Sequence[dict[str, Any]]) -> SafeString:
    title = f"Proxy evaluation {evaluation.pk}: implied preference of best-of-k over best-of-1"
    keys = ("preference", "preference_low", "preference_high")
    return _chart(curves, keys, title, "preference over best-of-1", reference=0.5, bounds=UNIT)


def _chart(
    curves: Sequence[dict[str, Any]],
    keys: tuple[str, str, str],
    title: str,
    y_label: str,
    reference: float | None = None,
    bounds: tuple[float, float] | None = None,
) -> SafeString:
    """One series per run against log2(k), each point with its interval bar; ``bounds``: the y quantity's
    known range (a preference: 0 to 1), drawn whole."""
    value, low, high = keys
    series, intervals = [], []
    ks: set[int] = set()
    for i, curve in enumerate(curves):
        points = curve.get("points", [])
        ks.update(point["k"] for point in points)
        series.append(Series(curve["short_label"], [(math.log2(p["k"]), p[value]) for p in points], i))
        intervals.append([(math.log2(p["k"]), p[low], p[high]) for p in points])
    if reference is not None and ks:
        edges = [(math.log2(min(ks)), reference), (math.log2(max(ks)), reference)]
        series.append(Series("no better than best-of-1", edges, 6, DOTTED))
        intervals.append([])
    ticks = [(math.log2(k), str(k)) for k in sorted(ks)]
    x_label = "k, samples per question (log2 axis)"
    return interval_chart(series, intervals, title, y_label, x_label, ticks, y_bounds=bounds)


@require_GET
@login_required
def proxy_results_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """The numbers of the charts, a row per run and k (only the header before the evaluation is done)."""
    evaluation = get_visible_or_404(ProxyEvaluation.objects, request.user, pk=pk)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="proxy-evaluation-{evaluation.pk}.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for curve in finished_curves(evaluation):
        for point in curve.get("points", []):
            writer.writerow(
                [
                    evaluation.pk,
                    _text_cell(evaluation.reward_model_name),
                    curve["run"],
                    _text_cell(curve.get("policy_name", "")),
                    _text_cell(curve.get("reward_model_name", "")),
                    curve.get("n"),
                    curve.get("selection"),
                    point["k"],
                    point["questions"],
                    point["mean"],
                    point["low"],
                    point["high"],
                    point["preference"],
                    point["preference_low"],
                    point["preference_high"],
                ]
            )
    return response


def _text_cell(text: str) -> str:
    """A name as a spreadsheet shows it, never as a formula it runs."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


@require_POST
@login_required
def proxy_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_visible_or_404(ProxyEvaluation.objects, request.user, pk=pk)
    cancel_unless_finished(request, evaluation, "Proxy evaluation", cancel_proxy_evaluation)
    return redirect("training:proxy_evaluation", pk=evaluation.pk)
