"""Researcher page for demonstration batches: which questions demonstrators get next, with overlap."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotation.demonstrations.batches import corpus_error, create_demonstration_batch
from annotation.models import DemonstrationBatch, EpisodeStatus, Question, Split
from webgpt_site.permissions import Role, role_required


class DemonstrationBatchForm(forms.Form):
    name = forms.CharField(max_length=200)
    dataset = forms.CharField(required=False, max_length=100, help_text="Empty: any dataset")
    split = forms.ChoiceField(choices=[("", "Any split"), *Split.choices], required=False, initial="bc")
    limit = forms.IntegerField(
        min_value=1, max_value=100_000, initial=50, help_text="At most this many questions"
    )
    overlap = forms.IntegerField(min_value=1, max_value=10, initial=1, help_text="Demonstrators per question")
    corpus = forms.CharField(
        required=False,
        max_length=100,
        help_text="The corpus its questions are answered with; empty: the default",
    )

    def clean_corpus(self) -> str:
        corpus = self.cleaned_data["corpus"].strip()
        if problem := corpus_error(corpus):
            raise forms.ValidationError(problem)
        return corpus

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
