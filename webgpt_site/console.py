"""The researcher console: the question bank at a glance, imports, and worker health."""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.models import Question, QuestionImport
from annotation.questions.forms import QuestionImportForm
from browser.sources import provider_health, provider_status
from core.permissions import Role, role_required
from core.workers import latest_pings, request_pings


def bank_summary() -> tuple[list[dict[str, object]], dict[str, int]]:
    """Question counts per dataset and split, plus the totals per split (one grouped query)."""
    per_dataset: dict[str, dict[str, int]] = defaultdict(dict)
    totals = dict.fromkeys(settings.QUESTION_SPLITS, 0)
    for row in Question.objects.values("dataset", "split").annotate(n=Count("id")).order_by():
        per_dataset[row["dataset"]][row["split"]] = row["n"]
        totals[row["split"]] += row["n"]
    rows = [
        {
            "dataset": dataset,
            "counts": [counts.get(split, 0) for split in settings.QUESTION_SPLITS],
            "total": sum(counts.values()),
        }
        for dataset, counts in sorted(per_dataset.items())
    ]
    return rows, totals


@require_GET
@role_required(Role.RESEARCHER)
def home(request: HttpRequest) -> HttpResponse:
    rows, totals = bank_summary()
    return render(
        request,
        "console/home.html",
        {
            "bank_rows": rows,
            "split_totals": [totals[split] for split in settings.QUESTION_SPLITS],
            "bank_total": sum(totals.values()),
            "splits": settings.QUESTION_SPLITS,
            "split_ratios": settings.QUESTION_SPLIT_RATIOS,
            "imports": QuestionImport.objects.select_related("created_by")[:10],
            "pings": latest_pings(),
            "import_form": QuestionImportForm(),
            "providers": provider_status(),
        },
    )


@require_GET
@role_required(Role.RESEARCHER)
@vary_on_headers("HX-Request")
def worker_status(request: HttpRequest) -> HttpResponse:
    return render(request, "console/_workers.html", {"pings": latest_pings()})


@require_POST
@role_required(Role.RESEARCHER)
def check_workers(request: HttpRequest) -> HttpResponse:
    pings = request_pings(request.user)
    if not request.htmx:
        return redirect("console:home")
    return render(request, "console/_workers.html", {"pings": pings})


@require_POST
@role_required(Role.RESEARCHER)
def check_providers(request: HttpRequest) -> HttpResponse:
    """Each configured live provider asked one test query, answered in this request (each call is bounded
    by the provider's time limit): the page shows whether it answers, and how fast."""
    context = {"providers": provider_status(provider_health())}
    if not request.htmx:
        return render(request, "console/providers.html", context)
    return render(request, "console/_providers.html", context)
