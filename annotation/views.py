"""Where labelers start their work (demonstrators: ``annotation.demonstrations.views``)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webgpt_site.permissions import Role, role_required


@require_GET
@role_required(Role.LABELER)
def next_task(request: HttpRequest) -> HttpResponse:
    return render(request, "annotation/next_task.html")
