"""Researcher pages for feedback batches: list with progress, create, detail with labeler quality."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.feedback.batches import (
    MAX_INSTRUCTIONS,
    MAX_NAME,
    OVERLAP,
    SOURCES,
    BatchError,
    BatchSettings,
    check_batch_request,
    create_batch_from_source,
)
from annotation.feedback.scales import RATING_PRESETS, TEMPLATES
from annotation.feedback.stats import batch_progress, labeler_stats, late_submissions
from annotation.models import FeedbackBatch
from annotation.questions.formats import QuestionFileError
from webgpt_site.permissions import Role, get_visible_or_404, role_required


def _number(low: float, high: float, step: str = "1") -> forms.NumberInput:
    """The browser's hint of the range; the rule itself is ``batches.check_batch_settings``."""
    return forms.NumberInput(attrs={"min": low, "max": high, "step": step})


class FeedbackBatchForm(forms.Form):
    """The page's fields; what a batch may be is checked by ``batches.check_batch_request``, the same check
    as the API's and the ``create_feedback_batch`` command's."""

    name = forms.CharField(widget=forms.TextInput(attrs={"maxlength": MAX_NAME}))
    template = forms.ChoiceField(choices=TEMPLATES)
    preset = forms.ChoiceField(
        required=False,
        choices=[("", "— (ratings only)"), *[(p, p) for p in RATING_PRESETS]],
        label="Rating preset",
    )
    source = forms.ChoiceField(choices=SOURCES, label="Answers")
    answers_file = forms.FileField(
        required=False,
        help_text="For the answers-file source: JSONL {question_id or question, answer, quotes, source}",
    )
    overlap = forms.IntegerField(initial=1, widget=_number(*OVERLAP), help_text="Labelers per item")
    required_probability = forms.FloatField(
        initial=0.1,
        widget=_number(0, 1, "any"),
        help_text="Probability that every part of a task is required",
    )
    always_required = forms.CharField(
        required=False,
        help_text="Comma-separated field codes required in every task (empty: the template's default)",
    )
    instructions = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "maxlength": MAX_INSTRUCTIONS})
    )
    gold_pairs = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Comparisons only: gold items, one per line: '12 > 34' or '12 = 34' (answer ids)",
    )
    lease_minutes = forms.IntegerField(initial=30, widget=_number(1, 24 * 60))
    revision_minutes = forms.IntegerField(initial=60, widget=_number(0, 7 * 24 * 60))

    # The check names BatchSettings' fields; these are the page's names for them.
    FIELD_NAMES = {"lease_seconds": "lease_minutes", "revision_seconds": "revision_minutes"}

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        always = [code.strip() for code in data["always_required"].split(",") if code.strip()] or None
        data["settings"] = BatchSettings(
            name=data["name"],
            template=data["template"],
            preset=data["preset"],
            instructions=data["instructions"],
            overlap=data["overlap"],
            required_probability=data["required_probability"],
            always_required=always,
            lease_seconds=data["lease_minutes"] * 60,
            revision_seconds=data["revision_minutes"] * 60,
        )
        try:
            check_batch_request(
                data["settings"], data["source"], data["answers_file"] is not None, data["gold_pairs"]
            )
        except BatchError as exc:
            self.add_error(self.FIELD_NAMES.get(exc.field, exc.field), exc.message)
        return data


@require_GET
@role_required(Role.RESEARCHER)
def batch_list(request: HttpRequest) -> HttpResponse:
    batches = [(batch, batch_progress(batch)) for batch in FeedbackBatch.objects.order_by("-created_at")]
    return render(request, "console/feedback_list.html", {"batches": batches, "form": FeedbackBatchForm()})


@require_http_methods(["POST"])
@role_required(Role.RESEARCHER)
def batch_create(request: HttpRequest) -> HttpResponse:
    form = FeedbackBatchForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["answers_file"]
        try:
            batch = create_batch_from_source(
                request.user,
                form.cleaned_data["settings"],
                form.cleaned_data["source"],
                upload,  # read a chunk at a time, after its size is checked
                gold_pairs=form.cleaned_data["gold_pairs"],
            )
        except (BatchError, QuestionFileError) as exc:
            form.add_error(None, f"{exc}. Nothing was created.")
        else:
            messages.success(request, f"Batch {batch.name!r} created with {batch.items.count()} items.")
            return redirect("console:feedback_batch", pk=batch.pk)
    batches = [(batch, batch_progress(batch)) for batch in FeedbackBatch.objects.order_by("-created_at")]
    return render(request, "console/feedback_list.html", {"batches": batches, "form": form}, status=400)


@require_GET
@role_required(Role.RESEARCHER)
def batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    context = {
        "batch": batch,
        "progress": batch_progress(batch),
        "labelers": labeler_stats(batch),
        "late": late_submissions(batch)[:100],  # the oldest; the count above has them all
    }
    return render(request, "console/feedback_detail.html", context)


@require_POST
@role_required(Role.RESEARCHER)
def batch_toggle(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    batch.is_active = not batch.is_active
    batch.save(update_fields=["is_active"])
    messages.info(request, f"Batch {'started' if batch.is_active else 'paused'}.")
    return redirect("console:feedback_batch", pk=batch.pk)
