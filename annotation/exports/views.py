"""Researcher pages for exports: request one, watch its progress (htmx), download the finished file."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from annotation.exports.rules import (
    EPISODE_KINDS,
    FILE_TYPES,
    PARQUET_HELP,
    SOURCES,
    ExportRequestError,
    clean_export_request,
    describe_filters,
    filter_arguments,
)
from annotation.exports.service import download_response, request_export
from annotation.feedback.run_source import sampling_runs
from annotation.feedback.scales import TEMPLATES
from annotation.models import Export, ExportFormat, FeedbackBatch, Split
from core.inputs import parse_id
from core.permissions import Role, get_visible_or_404, role_required


class ExportForm(forms.Form):
    """The page's fields; what a request may ask for is checked by ``rules.clean_export_request``, the
    same check as the API's and the command's."""

    export_format = forms.ChoiceField(choices=ExportFormat.choices, label="Format")
    file_type = forms.ChoiceField(choices=FILE_TYPES, initial="jsonl", required=False, help_text=PARQUET_HELP)
    batch = forms.ModelChoiceField(
        queryset=FeedbackBatch.objects.all(), required=False, help_text="Comparisons only"
    )
    split = forms.ChoiceField(
        choices=[("", "Any"), *Split.choices], required=False, help_text="Questions of this split only"
    )
    template = forms.ChoiceField(choices=[("", "Any"), *TEMPLATES], required=False)
    labeler = forms.CharField(required=False, max_length=150, help_text="User name")
    since = forms.DateField(required=False, help_text="YYYY-MM-DD, inclusive")
    until = forms.DateField(required=False, help_text="YYYY-MM-DD, inclusive")
    source = forms.ChoiceField(choices=SOURCES, required=False)
    exclude_flagged = forms.BooleanField(
        required=False,
        label="Leave out judgements flagged for review",
        help_text="Judgements excluded on a batch's flag review are left out whatever this says",
    )
    exclude_gold = forms.BooleanField(required=False, label="Leave out gold items")
    include_late = forms.BooleanField(
        required=False,
        label="Include late submissions",
        help_text="Stored after the lease ran out and the slot went to another labeler: extra judgements",
    )
    exclude_eval = forms.BooleanField(
        required=False,
        label="Leave out evaluation questions",
        help_text="The eval split's, for training data: a model never trains on what it is evaluated on",
    )
    include_model_judgements = forms.BooleanField(
        required=False,
        label="Include model judgements",
        help_text="comparisons-full only: judge runs' judgements, each marked as a model's (judge, prompt)",
    )
    episode_kind = forms.ChoiceField(
        choices=EPISODE_KINDS,
        initial="human",
        required=False,
        label="Episodes",
        help_text="Demonstrations and bc-pairs only: human demonstrations, model samples or both",
    )
    sampling_run = forms.ModelChoiceField(
        queryset=sampling_runs().objects.order_by("-id"),
        required=False,
        help_text="Demonstrations and bc-pairs only: this sampling run's samples (implies model samples)",
        error_messages={"invalid_choice": "There is no sampling run %(value)s."},
    )

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        data["file_type"] = data["file_type"] or "jsonl"
        try:
            fields = {
                **data,
                "batch": data["batch"].pk if data["batch"] else None,
                "sampling_run": data["sampling_run"].pk if data["sampling_run"] else None,
            }
            data["filters"] = clean_export_request(
                data["export_format"], data["file_type"], **filter_arguments(fields)
            )
        except ExportRequestError as exc:
            self.add_error(exc.field, exc.message)
        return data


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def export_list(request: HttpRequest) -> HttpResponse:
    form = ExportForm(request.POST or None, initial=_prefill(request))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        export = request_export(request.user, data["export_format"], data["filters"], data["file_type"])
        return redirect("console:export", pk=export.pk)
    exports = Export.objects.select_related("owner")[:50]
    return render(
        request,
        "console/exports.html",
        {"form": form, "exports": exports},
        status=400 if form.errors else 200,
    )


def _prefill(request: HttpRequest) -> dict[str, Any]:
    """?batch=ID&export_format=...&exclude_eval=on from a round's "Export the judgements" link (unknown
    values: ignored)."""
    initial: dict[str, Any] = {}
    batch = parse_id(request.GET.get("batch"))
    if batch is not None and FeedbackBatch.objects.filter(pk=batch).exists():
        initial["batch"] = batch
    if request.GET.get("export_format") in ExportFormat.values:
        initial["export_format"] = request.GET["export_format"]
    if request.GET.get("exclude_eval") == "on":
        initial["exclude_eval"] = True
    return initial


@require_GET
@login_required  # visibility decides: for anyone but researchers an export does not exist (404)
@vary_on_headers("HX-Request")
def export_detail(request: HttpRequest, pk: int) -> HttpResponse:
    export = get_visible_or_404(Export.objects.select_related("owner"), request.user, pk=pk)
    template = "console/_export_status.html" if request.htmx else "console/export_detail.html"
    return render(request, template, {"export": export, "filters": describe_filters(export.filters)})


@require_GET
@login_required
def export_download(request: HttpRequest, pk: int) -> HttpResponse:
    """Files are served through this permission check, never from a public media URL or bucket."""
    export = get_visible_or_404(Export.objects, request.user, pk=pk)
    try:
        return download_response(export)  # the file, or a redirect to a presigned URL valid for minutes
    except Http404 as missing:  # the export's page, saying why there is no file (the plain 404 page cannot)
        context = {"export": export, "filters": describe_filters(export.filters), "problem": str(missing)}
        return render(request, "console/export_detail.html", context, status=404)
