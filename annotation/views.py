"""Where demonstrators and labelers start their work."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.models import Question, Split
from webgpt_site.permissions import Role, role_required


@require_GET
@role_required(Role.DEMONSTRATOR)
def next_question(request: HttpRequest) -> HttpResponse:
    waiting = Question.objects.filter(split=Split.BC).count()
    return render(request, "annotation/next_question.html", {"waiting": waiting})


@require_GET
@role_required(Role.LABELER)
def next_task(request: HttpRequest) -> HttpResponse:
    return render(request, "annotation/next_task.html")
