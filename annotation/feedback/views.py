"""The labeler's pages: next task, the task (one page per template), drafts, submit, skip."""

from __future__ import annotations

import uuid
from contextlib import suppress

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotation.feedback import assignment as work
from annotation.feedback import progress
from annotation.feedback.forms import response_from_post
from annotation.feedback.presenter import task_context
from annotation.feedback.validation import AnswerShape, input_errors, skip_reason_error
from annotation.models import ActiveKind, Assignment, AssignmentStatus, EpisodeAction
from annotation.workforce import activity, gate
from browser.engine.page import BLANK_PAGE
from browser.models import PageSnapshot
from browser.services import load_snapshot
from core.permissions import Role, any_role_required, get_visible_or_404, role_required

TEMPLATE_PAGES = {
    "webgpt_comparison": "tasks/webgpt_comparison.html",
    "minimal_comparison": "tasks/minimal_comparison.html",
    "ranking": "tasks/ranking.html",
    "rating": "tasks/rating.html",
    "step_review": "tasks/step_review.html",
    "step_preference": "tasks/step_preference.html",
}
NOT_SAVED = "What you sent was not saved: it is shown below to copy."


@require_GET
@role_required(Role.LABELER)
def landing(request: HttpRequest) -> HttpResponse:
    mine = Assignment.objects.filter(labeler=request.user).select_related("item__batch", "item__question")
    current = mine.filter(status=AssignmentStatus.LEASED, leased_until__gt=timezone.now()).first()
    done = mine.filter(status__in=(AssignmentStatus.SUBMITTED, AssignmentStatus.LATE))
    context = {"current": current, "recent": done[:10], **_waiting(request)}
    return render(request, "tasks/landing.html", context)


def _waiting(request: HttpRequest) -> dict:
    """What the landing page says is waiting: the kinds of task the labeler could get now (and how many in
    all), those the same-question window holds back, and today's count."""
    now = timezone.now()
    waiting = progress.waiting(request.user, now)
    return {
        "waiting": waiting.kinds,
        "waiting_total": waiting.total,
        "waiting_more": waiting.more,
        "held_back": waiting.held if waiting.held.count else None,
        "today": progress.submitted_today(request.user, now),
        "gate": gate.notices(request.user),
    }


@require_POST
@role_required(Role.LABELER)
def start(request: HttpRequest) -> HttpResponse:
    task = work.next_assignment(request.user)
    if task is None:
        # No message: the list says what waits, and what the same-question window holds back, once.
        return redirect("annotation:next_task")
    return redirect("annotation:task", pk=task.pk)


# The value of the task form's "Submit and back to the list" button; its default button is "Submit and next".
THEN_LIST = "list"


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
    refused: dict = {}
    if task.labeler_id == request.user.pk:
        # What the last refused submit left for this page (POST-redirect-GET: a reload never re-posts).
        refused = request.session.pop(_refused_key(task.pk), None) or {}
        if task.status in (AssignmentStatus.LEASED, AssignmentStatus.EXPIRED):
            # When the slot went to someone else the page stays open: a submit is then kept as late.
            with suppress(work.TaskClosed):
                task = work.keep_alive(task.pk, request.user)
    return _render_task(request, task, refused)


def _refused_key(pk: int) -> str:
    return f"task-{pk}-refused"


def _refuse(request: HttpRequest, task: Assignment, **refused: dict) -> HttpResponse:
    """Back to the task page, which shows the errors or the response that was not stored, once."""
    request.session[_refused_key(task.pk)] = refused
    return redirect("annotation:task", pk=task.pk)


def _render_task(request: HttpRequest, task: Assignment, refused: dict) -> HttpResponse:
    context = task_context(task, errors=refused.get("errors"), refused=refused.get("response"))
    mine = task.labeler_id == request.user.pk
    revision = context["revision"]
    closed = revision is not None and not revision.revisable  # a submit would be refused: say so up front
    # Paused, revoked or past the screening test: the page says why and takes nothing (as submit would).
    standing = work.standing_refusal(task, request.user) if mine else ""
    context["mine"], context["standing"] = mine, standing.removeprefix("Not saved: ")
    context["read_only"] = not mine or task.status not in EDITABLE or closed or bool(standing)
    expired = mine and task.status == AssignmentStatus.EXPIRED and not standing
    context["slot_gone"] = work.SLOT_GONE if expired else ""
    # The labeler's own progress line; a researcher looking at someone's task, or entering a reference,
    # sees none.
    context["progress"] = progress.task_progress(task) if mine and not task.is_reference else None
    return render(request, TEMPLATE_PAGES[task.item.batch.template], context)


# A submitted task may be revised; an expired one whose slot went to someone else is still submitted, late.
EDITABLE = (
    AssignmentStatus.LEASED,
    AssignmentStatus.SUBMITTED,
    AssignmentStatus.EXPIRED,
    AssignmentStatus.LATE,
    AssignmentStatus.REFERENCE,  # a researcher's reference may be revised at any time
)


def _response(request: HttpRequest, task: Assignment, shapes: list[AnswerShape] | None = None) -> dict:
    shapes = work.answer_shapes(task) if shapes is None else shapes
    return response_from_post(
        task.item.batch.template,
        task.item.batch.preset,
        request.POST,
        [shape.slot for shape in shapes],
        [shape.quote_count for shape in shapes],
    )


def _version(request: HttpRequest) -> int | None:
    """The task version the page was drawn from, or None when the form lacks it."""
    raw = request.POST.get("version", "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None


@require_POST
@any_role_required(Role.LABELER, Role.RESEARCHER)  # a researcher's own reference task
def draft(request: HttpRequest, pk: int) -> HttpResponse:
    task = _own(request, pk)
    response = _response(request, task)
    problems = input_errors(response)  # the API's check on drafts: nothing unstorable is kept
    if problems:
        return HttpResponse(" ".join(problems.values()), status=400)
    try:
        saved = work.save_draft(task.pk, request.user, response, version=_version(request))
    except work.TaskClosed as exc:
        return HttpResponse(str(exc), status=409)
    late = " Your time ran out and the task went to someone else: a submit is kept as late."
    return HttpResponse(
        f"Draft saved at {timezone.localtime():%H:%M:%S}."
        + (late if saved.status == AssignmentStatus.EXPIRED else "")
    )


@require_POST
@any_role_required(Role.LABELER, Role.RESEARCHER)  # a researcher's own reference task
def submit(request: HttpRequest, pk: int) -> HttpResponse:
    task = _own(request, pk)
    version = _version(request)
    try:
        key = uuid.UUID(request.POST.get("submit_key", ""))
    except ValueError:
        key = None
    shapes = work.answer_shapes(task)  # read once: an assignment's answers and their order never change
    response = _response(request, task, shapes)
    problems = input_errors(response)  # the API's check on bodies, before anything is stored or shown back
    if problems:
        return _refuse(request, task, errors=problems)
    if key is None or version is None:
        messages.error(request, f"That form was incomplete. {NOT_SAVED}")
        return _refuse(request, task, response=response)
    try:
        result = work.submit(task.pk, request.user, response, key, version=version, shapes=shapes)
    except work.TaskClosed as exc:
        messages.error(request, f"{exc} {NOT_SAVED}")
        return _refuse(request, task, response=response)
    if result.stale:
        messages.error(request, f"{work.STALE_TASK} {NOT_SAVED}")
        return _refuse(request, task, response=response)
    if result.validation is not None and not result.validation.complete:
        return _refuse(request, task, errors=result.validation.errors)  # the response is kept as the draft
    if task.is_reference:
        messages.success(request, f"Reference of item {task.item_id} saved.")
        return _back_to_gold(task)
    return _after_submit(request, late=result.late)


def _back_to_gold(task: Assignment) -> HttpResponse:
    """A researcher's reference task leads back to its batch's gold items, not to a labeler's next task."""
    return redirect(reverse("console:feedback_gold", args=[task.item.batch_id]) + f"#item-{task.item_id}")


def _after_submit(request: HttpRequest, *, late: bool) -> HttpResponse:
    """Where a stored submit leads: "Submit and next" straight to the labeler's next task, sparing a click
    back to the list per task (as labeling tools do); "Submit and back to the list", or nothing left to hand
    out, to the list. A labeler who stops takes no lease, which would hold an item from others until it
    expired."""
    stop = request.POST.get("then") == THEN_LIST
    following = None if stop else work.next_assignment(request.user)
    if late:
        messages.warning(
            request,
            "Submitted late: your time ran out and the task went to someone else. Your response is kept "
            "for the researchers, but exports leave it out.",
        )
    else:
        last = "" if following or stop else " That was your last task for now."
        messages.success(request, f"Submitted. Thank you!{last}")
    if following is None:
        return redirect("annotation:next_task")  # the list says what waits, or what is held back and why
    return redirect("annotation:task", pk=following.pk)


@require_POST
@any_role_required(Role.LABELER, Role.RESEARCHER)  # a researcher's own reference task
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
    if task.is_reference:
        return _back_to_gold(task)
    return redirect("annotation:next_task")


@require_POST
@any_role_required(Role.LABELER, Role.RESEARCHER)  # a researcher's own reference task
def heartbeat(request: HttpRequest, pk: int) -> HttpResponse:
    task = _own(request, pk)
    served = activity.served_at(request.POST.get("page_view"), request.user, ActiveKind.TASK, task.pk)
    if served is None:  # no page of this task was served to this person: nothing is renewed or counted
        return HttpResponse(activity.NO_PAGE_VIEW, status=400)
    try:
        task = work.keep_alive(task.pk, request.user)
    except work.TaskClosed as exc:
        return HttpResponse(str(exc), status=409)
    if not task.is_reference:  # a researcher's reference is no one's paid work
        activity.record(request.user, ActiveKind.TASK, served)
    return HttpResponse(status=204)


@require_GET
@login_required
def step_page(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """The whole page a step review's episode showed before step ``index`` (the observation is its window
    in view), for the task's labeler or a researcher. A step preference shows only its state's page: the
    page after it would tell which action the episode took."""
    task = get_visible_or_404(
        Assignment.objects.select_related("item__batch", "item__question"), request.user, pk=pk
    )
    item = task.item
    if item.episode_id is None or (
        item.batch.template == "step_preference" and index != item.step.get("index")
    ):
        raise Http404("No such step.")
    action = EpisodeAction.objects.filter(episode_id=item.episode_id, index=index).only("page_before").first()
    if action is None:
        raise Http404("No such step.")
    try:
        page = BLANK_PAGE if action.page_before == BLANK_PAGE.digest else load_snapshot(action.page_before)
    except PageSnapshot.DoesNotExist:
        raise Http404("This page was not kept.") from None
    context = {
        "task": task,
        "question": item.question.text,
        "page": page,
        "number": index + 1,
        "index": index,
    }
    return render(request, "tasks/step_page.html", context)
