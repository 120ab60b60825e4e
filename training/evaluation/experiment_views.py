"""Researcher pages for experiment reports: the reports with the form that makes one (a name and the
policies to compare), a report (each policy's figures with their intervals, every number linked to the page
it came from, a chart per figure), and its downloads: JSON, CSV and a static HTML file with its charts
(inline SVG and styles, nothing fetched), to attach to a paper or a lab notebook."""

from __future__ import annotations

import csv
import json
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.permissions import Role, get_visible_or_404, role_required
from core.plot import Series, interval_chart
from training.errors import RunError
from training.evaluation.demo_report import make_demo_report
from training.evaluation.experiment_service import create_experiment
from training.evaluation.experiments import (
    ROW_FIELDS,
    PolicyKey,
    available_policies,
    experiment_report,
    report_rows,
)
from training.job_forms import JobRequestForm
from training.job_views import PAGE_SIZE
from training.models import Experiment

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run such a text cell
SHARES = ("Preferred", "TriviaQA", "TruthfulQA")  # figures that are shares of questions: drawn 0 to 1


class ExperimentForm(JobRequestForm):  # the service's refusal lands on the field it names
    name = forms.CharField(max_length=200)
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    policies = forms.MultipleChoiceField(
        choices=(),
        widget=forms.CheckboxSelectMultiple,
        help_text="A policy is a model sampled best-of-n against a reward model, as its finished sampling "
        "runs name it. Their comparisons, benchmarks, proxy evaluations and cost are gathered.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keys = {json.dumps(key.stored(), sort_keys=True): key for key in available_policies()}
        self.fields["policies"].choices = [(value, key.label) for value, key in self.keys.items()]

    def chosen(self) -> list[PolicyKey]:
        return [self.keys[value] for value in self.cleaned_data["policies"]]


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def experiment_list(request: HttpRequest) -> HttpResponse:
    form = ExperimentForm(request.POST or None)
    experiment = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        experiment = form.start(
            lambda: create_experiment(request.user, data["name"], form.chosen(), data["notes"])
        )
    if experiment is not None:
        return redirect("training:experiment", pk=experiment.pk)
    page = Paginator(Experiment.objects.select_related("created_by"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    status = 400 if form.errors else 200
    return render(request, "training/experiments.html", {"page": page, "form": form}, status=status)


@require_POST
@role_required(Role.RESEARCHER)
def experiment_demo(request: HttpRequest) -> HttpResponse:
    try:
        experiment = make_demo_report(request.user)
    except RunError as exc:
        messages.error(request, exc.reason[0].upper() + exc.reason[1:] + ". No report was made.")
        return redirect("training:experiments")
    count = len(experiment.policies)
    messages.success(
        request,
        f"{count} benchmark run{'s' if count != 1 else ''} queued: the figures fill in as they finish.",
    )
    return redirect("training:experiment", pk=experiment.pk)


def _visible(request: HttpRequest, pk: int) -> Experiment:
    return get_visible_or_404(Experiment.objects.select_related("created_by"), request.user, pk=pk)


def charts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """A chart per figure label: the policies numbered along the x axis (their names in the legend, "1:
    ..."), each its value with its 95% interval; each with its caption."""
    labels: dict[str, None] = {}
    for policy in report["policies"]:
        for figure in policy["figures"]:
            labels.setdefault(figure["label"], None)
    count = len(report["policies"])
    # Half a step of room at each end, so that the first and last policy's bars stay off the axes.
    ticks = [(-0.5, ""), *((float(i), str(i + 1)) for i in range(count)), (count - 0.5, "")]
    drawn = []
    for label in labels:
        series, bars = [], []
        for i, policy in enumerate(report["policies"]):
            figure = next(
                (f for f in policy["figures"] if f["label"] == label and f["value"] is not None), None
            )
            if figure is None:
                continue
            series.append(Series(f"{i + 1}: {policy['policy']}", [(float(i), figure["value"])], i))
            low, high = figure["low"], figure["high"]
            bars.append([(float(i), low, high)] if low is not None and high is not None else [])
        bounds = (0.0, 1.0) if label.startswith(SHARES) else None
        chart = interval_chart(series, bars, label, "value (95% interval)", "policy", ticks, y_bounds=bounds)
        if chart:
            drawn.append({"caption": label, "svg": chart})
    return drawn


@require_GET
@login_required  # visibility decides: for anyone but researchers a report does not exist (404)
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = _visible(request, pk)
    report = experiment_report(experiment)
    context = {"experiment": experiment, "report": report, "charts": charts(report)}
    return render(request, "training/experiment_detail.html", context)


@require_GET
@login_required
def experiment_json(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = _visible(request, pk)
    response = JsonResponse(experiment_report(experiment), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.json"'
    return response


@require_GET
@login_required
def experiment_csv(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = _visible(request, pk)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.csv"'
    writer = csv.writer(response)
    writer.writerow(ROW_FIELDS)
    for row in report_rows(experiment_report(experiment)):
        writer.writerow(
            [_text_cell(row[name]) if isinstance(row[name], str) else row[name] for name in ROW_FIELDS]
        )
    return response


def _text_cell(text: str) -> str:
    """A name as a spreadsheet shows it, never as a formula it runs."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def static_report(request: HttpRequest | None, experiment: Experiment) -> str:
    """The report as one self-contained HTML file (styles and charts inline; links absolute when a request
    gives the host)."""
    report = experiment_report(experiment)
    base = request.build_absolute_uri("/")[:-1] if request is not None else ""
    context = {"experiment": experiment, "report": report, "charts": charts(report), "base": base}
    return render_to_string("training/experiment_static.html", context)


@require_GET
@login_required
def experiment_html(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = _visible(request, pk)
    response = HttpResponse(static_report(request, experiment), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.html"'
    return response
