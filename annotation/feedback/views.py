"""The labeler's pages: next task, the task (one page per template), drafts, submit, skip."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotation.feedback import assignment as work
from annotation.feedback.forms import response_from_post
from annotation.feedback.presenter import task_context
from annotation.feedback.validation import input_errors, skip_reason_error
from annotation.models import Assignment, AssignmentStatus
from webgpt_site.permissions import Role, get_visible_or_404, role_required

TEMPLATE_PAGES = {
    "webgpt_comparison": "tasks/webgpt_comparison.html",
    "minimal_comparison": "tasks/minimal_comparison.html",
    "ranking": "tasks/ranking.html",
    "rating": "tasks/rating.html",
}


@require_GET
@role_required(Role.LABELER)
def landing(request: HttpRequest) -> HttpResponse:
    mine = Assignment.objects.filter(labeler=request.user).select_related("item__batch", "item__question")
    current = mine.filter(status=AssignmentStatus.LEASED, leased_until__gt=timezone.now()).first()
    return render(
        request,
        "tasks/landing.html",
        {"current": current, "recent": mine.filter(status=AssignmentStatus.SUBMITTED)[:10]},
    )


@require_POST
@role_required(Role.LABELER)
def start(request: HttpRequest) -> HttpResponse:
    task = work.next_assignment(request.user)
    if task is None:
        messages.info(request, "No feedback tasks are waiting for you right now. Thank you!")
        return redirect("annotation:next_task")
    return redirect("annotation:task", pk=task.pk)


def _own(request: HttpRequest, pk: int) -> Assignment:
    task = work.own_assignment(request.user, pk)
    if task is None:
        raise Http404("No such task.")
    return task


@require_GET
@login_required
def task_page(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_visible_or_404(
        Assignment.objects.select_related("item__batch", "item__question"), request.user, pk=pk
    )
    if task.labeler_id == request.user.pk and task.status in (
        AssignmentStatus.LEASED,
        AssignmentStatus.EXPIRED,
    ):
        try:
            task = work.keep_alive(task.pk, request.user)
        except work.TaskClosed as exc:
            messages.error(request, str(exc))
            return redirect("annotation:next_task")
    return _render_task(request, task)


def _render_task(
    request: HttpRequest, task: Assignment, errors: dict | None = None, status: int = 200
) -> HttpResponse:
    context = task_context(task, errors=errors)
    context["read_only"] = task.labeler_id != request.user.pk or task.status not in (
        AssignmentStatus.LEASED,
        AssignmentStatus.SUBMITTED,
    )
    return render(request, TEMPLATE_PAGES[task.item.batch.template], context, status=status)


def _response(request: HttpRequest, task: Assignment) -> dict:
    shapes = work.answer_shapes(task)
    return response_from_post(
        task.item.batch.template,
        task.item.batch.preset,
        request.POST,
        [shape.slot for shape in shapes],
        [shape.quote_count for shape in shapes],
    )


@require_POST
@role_required(Role.LABELER)
def draft(request: HttpRequest, pk: int) -> HttpResponse:
    task = _own(request, pk)
    response = _response(request, task)
    problems = input_errors(response)  # the API's check on drafts: nothing unstorable is kept
    if problems:
        return HttpResponse(" ".join(problems.values()), status=400)
    try:
        work.save_draft(task.pk, request.user, response)
    except work.TaskClosed as exc:
        return HttpResponse(str(exc), status=409)
    return HttpResponse(f"Draft saved at {timezone.localtime():%H:%M:%S}.")


@require_POST
@role_required(Role.LABELER)
def submit(request: HttpRequest, pk: int) -> HttpResponse:
    task = _own(request, pk)
    try:
        key = uuid.UUID(request.POST.get("submit_key", ""))
    except ValueError:
        messages.error(request, "That form was incomplete; reload the page.")
        return redirect("annotation:task", pk=task.pk)
    response = _response(request, task)
    problems = input_errors(response)  # the API's check on bodies, before anything is stored or shown back
    if problems:
        return _render_task(request, task, errors=problems, status=400)
    try:
        result = work.submit(task.pk, request.user, response, key)
    except work.TaskClosed as exc:
        messages.error(request, str(exc))
        return redirect("annotation:next_task")
    if result.validation is not None and not result.validation.complete:
        task.refresh_from_db()
        return _render_task(request, task, errors=result.validation.errors, status=400)
    messages.success(request, "Submitted. Thank you!")
    return redirect("annotation:next_task")


@require_POST
@role_required(Role.LABELER)
def skip(request: HttpRequest, pk: int) -> HttpResponse:
    task = _own(request, pk)
    reason = request.POST.get("reason", "")
    problem = skip_reason_error(reason)  # the API's rule for reasons
    if problem:
        messages.error(request, problem)
        return redirect("annotation:task", pk=task.pk)
    try:
        work.skip(task.pk, request.user, reason)
    except work.TaskClosed as exc:
        messages.error(request, str(exc))
        return redirect("annotation:task", pk=task.pk)
    messages.info(request, "Task skipped.")
    return redirect("annotation:next_task")


@require_POST
@role_required(Role.LABELER)
def heartbeat(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        work.keep_alive(_own(request, pk).pk, request.user)
    except work.TaskClosed as exc:
        return HttpResponse(str(exc), status=409)
    return HttpResponse(status=204)
