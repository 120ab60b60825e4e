"""Researcher pages for rounds: the rounds in order with their results (did the last round improve on the
one before?), a new round from sampling runs, and a round's page, where everything links to what it came
from and the next step of the loop (export the judgements, retrain the reward model) is one click away."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.feedback.results import headline
from annotation.feedback.results_views import FIGURE, Column, Table, write_csv
from training.models import Round, SamplingRun
from training.rounds import (
    MAX_NAME,
    MAX_NOTES,
    RoundContents,
    RoundError,
    add_runs,
    create_round,
    export_query,
    retrain_query,
    rm_accuracy,
    round_contents,
)
from training.views import key_metrics
from webgpt_site.inputs import parse_id
from webgpt_site.params import ModelIdsField
from webgpt_site.permissions import Role, get_visible_or_404, role_required


class RoundForm(forms.Form):
    """The page's fields; what a round may be is checked by ``rounds.check_round_request`` (the API's too)."""

    name = forms.CharField(required=False, widget=forms.TextInput(attrs={"maxlength": MAX_NAME}))
    sampling_runs = ModelIdsField(
        queryset=SamplingRun.objects.order_by("-pk"),
        help_text="The runs this turn of the loop sampled (batches, exports and models are found from them)",
        error_messages={"invalid_choice": "There is no sampling run %(value)s."},
    )
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "maxlength": MAX_NOTES}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["sampling_runs"].label_from_instance = run_label


def run_label(run: SamplingRun) -> str:
    scored = f", scored by {run.reward_model_name}" if run.reward_model_name else ""
    return f"run {run.pk}: {run.policy_name} best-of-{run.n}{scored} ({run.get_status_display().lower()})"


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
        "training": [(run, key_metrics(run)) for run in contents.training_runs],
        "retrain": [
            (export, urlencode(retrain_query(contents, export))) for export in contents.retrain_exports
        ],
    }


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
            label = f"Validation accuracy of the reward model of training run {row['rm_accuracy']['run']}"
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
def round_detail(request: HttpRequest, pk: int) -> HttpResponse:
    round_ = get_visible_or_404(Round.objects, request.user, pk=pk)
    return _detail_page(request, round_, AddRunsForm())


def _detail_page(request: HttpRequest, round_: Round, form: AddRunsForm, status: int = 200) -> HttpResponse:
    summary = round_summary(round_contents(round_))
    earlier = Round.objects.filter(number__lt=round_.number).order_by("-number").first()
    later = Round.objects.filter(number__gt=round_.number).order_by("number").first()
    context = {**summary, "round": round_, "form": form, "earlier": earlier, "later": later}
    return render(request, "training/round_detail.html", context, status=status)


class AddRunsForm(forms.Form):
    sampling_runs = ModelIdsField(
        queryset=SamplingRun.objects.order_by("-pk"),
        label="Add sampling runs",
        error_messages={"invalid_choice": "There is no sampling run %(value)s."},
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["sampling_runs"].label_from_instance = run_label


@require_POST
@login_required
def round_add_runs(request: HttpRequest, pk: int) -> HttpResponse:
    round_ = get_visible_or_404(Round.objects, request.user, pk=pk)
    form = AddRunsForm(request.POST)
    if form.is_valid():
        try:
            added = add_runs(request.user, round_, [run.pk for run in form.cleaned_data["sampling_runs"]])
        except RoundError as exc:
            form.add_error(exc.field, exc.message)
        else:
            messages.success(request, f"Added sampling run {', '.join(str(run.pk) for run in added)}.")
            return redirect("training:round", pk=round_.pk)
    return _detail_page(request, round_, form, status=400)
