"""Researcher page for demonstration batches: which questions demonstrators get next, with overlap."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotation.demonstrations.batches import GRADE_CUTOFF, create_demonstration_batch
from annotation.models import DemonstrationBatch, EpisodeStatus, Question, Split
from browser.sources import LOCAL, check_source, provider_choices
from core.permissions import Role, role_required


class DemonstrationBatchForm(forms.Form):
    name = forms.CharField(max_length=200)
    dataset = forms.CharField(required=False, max_length=100, help_text="Empty: any dataset")
    split = forms.ChoiceField(choices=[("", "Any split"), *Split.choices], required=False, initial="bc")
    limit = forms.IntegerField(
        min_value=1, max_value=100_000, initial=50, help_text="At most this many questions"
    )
    overlap = forms.IntegerField(min_value=1, max_value=10, initial=1, help_text="Demonstrators per question")
    is_screening = forms.BooleanField(
        required=False,
        label="Screening test",
        help_text="Every applicant demonstrates every question, so the overlap does not apply; researchers "
        "grade the demonstrations 1-7",
    )
    grade_cutoff = forms.FloatField(
        required=False,
        min_value=GRADE_CUTOFF[0],
        max_value=GRADE_CUTOFF[1],
        initial=DemonstrationBatch._meta.get_field("grade_cutoff").default,
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="Screening: the soft cutoff on the mean grade (InstructGPT: 6); empty: the default",
    )
    search = forms.ChoiceField(
        label="Search with",
        choices=(),
        initial=LOCAL,
        required=False,
        help_text="The local index of a corpus, or a live-web provider the operator configured",
    )
    corpus = forms.CharField(
        required=False,
        max_length=100,
        help_text="For the local index: the corpus its questions are answered with; empty: the default",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["search"].choices = provider_choices()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["corpus"] = data.get("corpus", "").strip()
        data["search"] = data.get("search") or LOCAL  # not sent: the local index, as before providers
        if "search" not in self.errors and (problem := check_source(data["search"], data["corpus"])):
            self.add_error(*problem)
        return data

    def questions(self) -> list[int]:
        data = self.cleaned_data
        questions = Question.objects.order_by("key")
        if data["dataset"]:
            questions = questions.filter(dataset=data["dataset"])
        if data["split"]:
            questions = questions.filter(split=data["split"])
        return list(questions.values_list("pk", flat=True)[: data["limit"]])


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def batches(request: HttpRequest) -> HttpResponse:
    form = DemonstrationBatchForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        ids = form.questions()
        if not ids:
            form.add_error(None, "No question matches; nothing was created.")
        else:
            batch = create_demonstration_batch(
                request.user,
                form.cleaned_data["name"],
                Question.objects.filter(pk__in=ids),
                form.cleaned_data["overlap"],
                corpus=form.cleaned_data["corpus"],
                search=form.cleaned_data["search"],
                is_screening=form.cleaned_data["is_screening"],
                grade_cutoff=form.cleaned_data["grade_cutoff"],
            )
            messages.success(request, f"Batch {batch.name!r} created with {len(ids)} questions.")
            return redirect("console:demonstration_batches")
    rows = DemonstrationBatch.objects.annotate(
        n_questions=Count("questions", distinct=True),
        finished=Count("episode", filter=Q(episode__status=EpisodeStatus.FINISHED), distinct=True),
    ).order_by("-created_at")
    status = 400 if form.errors else 200
    context = {
        "form": form,
        "batches": rows,
        "default_corpus": settings.DEFAULT_CORPUS,
        "split_fallback": settings.DEMONSTRATION_SPLIT_FALLBACK,
    }
    return render(request, "console/demonstration_batches.html", context, status=status)
