"""Question bank pages (researchers): list, detail, import and import reports."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.models import Question, QuestionImport
from annotation.questions.formats import QuestionFileError
from annotation.questions.forms import QuestionFilterForm, QuestionImportForm
from annotation.questions.service import import_questions
from core.permissions import Role, get_visible_or_404, role_required

PAGE_SIZE = 50


@require_GET
@role_required(Role.RESEARCHER)
def question_list(request: HttpRequest) -> HttpResponse:
    form = QuestionFilterForm(request.GET)
    questions = Question.objects.visible_to(request.user)
    questions = form.filter(questions) if form.is_valid() else questions.none()
    page = Paginator(questions.order_by("id"), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "questions/list.html", {"form": form, "page": page, "query": query.urlencode()})


@require_GET
@login_required  # visibility, not the role, decides: a hidden object is a 404 like a missing one
def question_detail(request: HttpRequest, pk: int) -> HttpResponse:
    question = get_visible_or_404(Question.objects.select_related("source_import"), request.user, pk=pk)
    metadata = [
        (key, "; ".join(map(str, value)) if isinstance(value, list) else value)
        for key, value in question.metadata.items()
    ]
    return render(request, "questions/detail.html", {"question": question, "metadata": metadata})


@require_POST
@role_required(Role.RESEARCHER)
def question_import(request: HttpRequest) -> HttpResponse:
    form = QuestionImportForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            report = import_questions(
                upload,  # its size is checked before it is read, a chunk at a time
                filename=upload.name,
                user=request.user,
                dataset=form.cleaned_data["dataset"] or None,
                file_format=form.cleaned_data["file_format"] or None,
                explain_statements=form.cleaned_data["explain_statements"] or None,
            )
        except QuestionFileError as exc:
            form.add_error("file", f"{upload.name}: {exc}. Nothing was imported.")
        else:
            messages.success(
                request,
                f"{report.filename}: {report.created_count} questions imported, "
                f"{report.duplicate_count} duplicates skipped.",
            )
            return redirect("questions:import_detail", pk=report.pk)
    return render(request, "questions/import_form.html", {"import_form": form}, status=400)


@require_GET
@login_required
def import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    report = get_visible_or_404(QuestionImport.objects.select_related("created_by"), request.user, pk=pk)
    return render(request, "questions/import_detail.html", {"report": report})
