"""Researcher pages for rounds: the rounds in order with their results (did the last round improve on the
one before?), a new round from sampling runs, and a round's page, where everything links to what it came
from and the next step of the loop (export the data, retrain the reward model) is one click away."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.feedback.results import headline
from annotation.feedback.results_views import FIGURE, Column, Table, write_csv
from core.inputs import parse_id
from core.permissions import Role, get_visible_or_404, role_required
from training.evaluation.round_data import request_retrain_export, retrain_data, retrain_options
from training.evaluation.round_forms import AddRunsForm, RetrainForm, RoundForm
from training.evaluation.rounds import (
    RoundContents,
    RoundError,
    add_runs,
    create_round,
    export_data,
    export_query,
    retrain_query,
    rm_accuracy,
    round_contents,
)
from training.job_views import key_metrics
from training.models import Round
from training.runs.config import RMConfig


def batch_rows(contents: RoundContents) -> list[dict[str, Any]]:
    return [
        {"batch": batch, "headline": headline(batch), "export_query": urlencode(export_query(batch))}
        for batch in contents.batches
    ]


def round_summary(contents: RoundContents) -> dict[str, Any]:
    """The figures a round is judged by: each batch's headline result and the reward model's accuracy."""
    return {
        "contents": contents,
        "batches": batch_rows(contents),
        "rm_accuracy": rm_accuracy(contents),
        "exports": [(export, export_data(export)) for export in contents.exports],
        "training": [(run, key_metrics(run), export_data(run.export)) for run in contents.training_runs],
        **retrain_exports(contents),
    }


def retrain_exports(contents: RoundContents) -> dict[str, Any]:
    """The round's reward-model exports with the data each holds and, once written, the training form's
    prefill to retrain on it; ``pending`` while one is still being written (the block polls)."""
    rows = [
        {
            "export": export,
            "data": export_data(export),
            "query": urlencode(retrain_query(contents, export)) if export.status == "done" else None,
        }
        for export in contents.rm_exports
    ]
    pending = any(export.status in ("queued", "running") for export in contents.rm_exports)
    return {"retrain": rows, "pending": pending}


def compare_with_previous(rows: list[dict[str, Any]]) -> None:
    """For each round's headline figures, the change from the same figure of the round before (matched by
    its label) and whether the two 95% intervals are apart: a change inside them is not an improvement."""
    previous: dict[str, dict[str, Any]] = {}
    for row in rows:
        current: dict[str, dict[str, Any]] = {}
        for batch_row in row["batches"]:
            figure = batch_row["headline"]
            if not figure or figure.get("value") is None:
                continue
            key = figure.get("kind") or figure["label"]
            before = previous.get(key)
            if before is not None:
                batch_row["change"] = figure["value"] - before["value"]
                batch_row["change_text"] = f"{batch_row['change']:+.3f}"
                batch_row["separated"] = _separated(figure, before)
            current[key] = figure
        previous |= current


def _separated(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if None in (a.get("low"), a.get("high"), b.get("low"), b.get("high")):
        return False
    return a["low"] > b["high"] or b["low"] > a["high"]


ROUND_COLUMNS = (
    Column("Round", "round", "count"),
    Column("Round name", "name"),
    Column("Batch", "batch", "count"),
    Column("Batch name", "batch_name"),
    Column("Figure", "label"),
    *FIGURE,
    Column("Change from the round before", "change", "number"),
    Column("Outside both intervals", "separated"),
)


def round_table(rows: list[dict[str, Any]]) -> Table:
    """The rounds page's results as one table (the CSV): a row per batch figure and per retrained reward
    model's accuracy, rounds in order."""
    lines: list[dict[str, Any]] = []
    for row in rows:
        round_ = row["contents"].round
        for batch_row in row["batches"]:
            figure = batch_row["headline"] or {}
            lines.append(
                {
                    "round": round_.number,
                    "name": round_.name,
                    "batch": batch_row["batch"].pk,
                    "batch_name": batch_row["batch"].name,
                    **figure,
                    "change": batch_row.get("change"),
                    "separated": batch_row.get("separated"),
                }
            )
        if row["rm_accuracy"]:
            accuracy = row["rm_accuracy"]
            label = f"Validation accuracy of the reward model of training run {accuracy['run']}"
            label += f" (trained on {accuracy['data']})"
            lines.append({"round": round_.number, "name": round_.name, **row["rm_accuracy"], "label": label})
    return Table("rounds", "Rounds", ROUND_COLUMNS, lines)


def _rounds_rows() -> list[dict[str, Any]]:
    rounds = Round.objects.prefetch_related("sampling_runs").order_by("number")
    rows = [round_summary(round_contents(round_)) for round_ in rounds]
    compare_with_previous(rows)
    return rows


@require_GET
@role_required(Role.RESEARCHER)
def rounds_csv(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="rounds.csv"'
    write_csv(response, round_table(_rounds_rows()))
    return response


def _initial_runs(request: HttpRequest) -> dict[str, Any]:
    """?runs=3 from a sampling run's "Start a round" link."""
    ids = [pk for pk in (parse_id(value) for value in request.GET.getlist("runs")) if pk is not None]
    return {"sampling_runs": ids} if ids else {}


@require_GET
@role_required(Role.RESEARCHER)
def round_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request, RoundForm(initial=_initial_runs(request)))


def _list_page(request: HttpRequest, form: RoundForm, status: int = 200) -> HttpResponse:
    rows = _rounds_rows()
    return render(request, "training/rounds.html", {"rows": rows, "form": form}, status=status)


@require_POST
@role_required(Role.RESEARCHER)
def round_create(request: HttpRequest) -> HttpResponse:
    form = RoundForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            created = create_round(
                request.user, data["name"], data["notes"], [run.pk for run in data["sampling_runs"]]
            )
        except RoundError as exc:
            form.add_error(exc.field, exc.message)
        else:
            messages.success(request, f"{created} started.")
            return redirect("training:round", pk=created.pk)
    return _list_page(request, form, status=400)


@require_GET
@login_required  # visibility decides: for anyone but researchers a round does not exist (404)
@vary_on_headers("HX-Request")
def round_detail(request: HttpRequest, pk: int) -> HttpResponse:
    round_ = get_visible_or_404(Round.objects, request.user, pk=pk)
    if request.htmx:  # the retraining block polls while an export of the round is being written
        context = {"round": round_, **retrain_exports(round_contents(round_))}
        return render(request, "training/_round_retrain.html", context)
    return _detail_page(request, round_)


def _detail_page(
    request: HttpRequest,
    round_: Round,
    add_form: AddRunsForm | None = None,
    retrain_form: RetrainForm | None = None,
    status: int = 200,
) -> HttpResponse:
    contents = round_contents(round_)
    choices = retrain_data(round_, contents.batches)
    context = {
        **round_summary(contents),
        "round": round_,
        "form": add_form or AddRunsForm(round_=round_),
        "retrain_form": retrain_form or RetrainForm(options=[choice.key for choice in choices]),
        "retrain_choices": choices,
        "validation_fraction": RMConfig().validation_fraction,
        "earlier": Round.objects.filter(number__lt=round_.number).order_by("-number").first(),
        "later": Round.objects.filter(number__gt=round_.number).order_by("number").first(),
    }
    return render(request, "training/round_detail.html", context, status=status)


@require_POST
@login_required
def round_retrain(request: HttpRequest, pk: int) -> HttpResponse:
    """Export the chosen data; the round's page then polls until it is written and offers the training
    form prefilled with it."""
    round_ = get_visible_or_404(Round.objects, request.user, pk=pk)
    form = RetrainForm(request.POST, options=retrain_options(round_contents(round_).batches))
    if not form.is_valid():
        return _detail_page(request, round_, retrain_form=form, status=400)
    export = request_retrain_export(request.user, round_, form.cleaned_data["choice"])
    done = "once it is written, retrain the reward model on it below"
    messages.success(request, f"Export {export.pk} queued on the exports worker: {done}.")
    return redirect(reverse("training:round", args=[round_.pk]) + "#retrain")


@require_POST
@login_required
def round_add_runs(request: HttpRequest, pk: int) -> HttpResponse:
    round_ = get_visible_or_404(Round.objects, request.user, pk=pk)
    form = AddRunsForm(request.POST, round_=round_)
    if form.is_valid():
        try:
            added = add_runs(request.user, round_, [run.pk for run in form.cleaned_data["sampling_runs"]])
        except RoundError as exc:
            form.add_error(exc.field, exc.message)
        else:
            messages.success(request, f"Added sampling run {', '.join(str(run.pk) for run in added)}.")
            return redirect("training:round", pk=round_.pk)
    return _detail_page(request, round_, add_form=form, status=400)
