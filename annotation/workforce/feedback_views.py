"""Pages of the feedback to the people doing the work: a labeler's or demonstrator's "My quality", the
researcher's gold items of a batch (references and their explanations), and reviews of demonstrations."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.models import Answer, Assignment, AssignmentStatus, Episode, FeedbackBatch, FeedbackItem
from annotation.workforce import quality
from annotation.workforce.as_seen import reference_lines, slot_names
from annotation.workforce.quality_chart import week_chart
from annotation.workforce.references import ReferenceError, start_reference
from annotation.workforce.reviews import ReviewError, parse_grade, save_review
from core.inputs import parse_id
from core.models import log_action
from core.permissions import Role, any_role_required, get_visible_or_404, role_required

MAX_EXPLANATION = 5000
GOLD_SHOWN = 200  # items listed on a batch's gold page; the count says how many in all


@require_GET
@any_role_required(Role.LABELER, Role.DEMONSTRATOR)
def my_quality(request: HttpRequest) -> HttpResponse:
    report = quality.report(request.user)
    # Each kind with weekly figures and its chart (the table under it keeps the numbers).
    over_time = [(kind, week_chart(kind)) for kind in report.kinds if kind.weeks]
    return render(request, "workforce/my_quality.html", {"report": report, "over_time": over_time})


def gold_items(batch: FeedbackBatch):
    """The items a batch's gold page lists: its gold items, or every item of a screening test (each needs
    a reference)."""
    items = batch.items.all() if batch.is_screening else batch.items.filter(is_gold=True)
    return items.order_by("id")


def _gold_page(
    request: HttpRequest, batch: FeedbackBatch, error: str = "", status: int = 200
) -> HttpResponse:
    listed = gold_items(batch)
    items = list(
        listed.select_related("question").prefetch_related(
            Prefetch("answers", queryset=Answer.objects.order_by("id").only("id", "text"))
        )[:GOLD_SHOWN]
    )
    references = {
        task.item_id: task
        for task in Assignment.objects.filter(
            item__batch=batch, is_reference=True, status=AssignmentStatus.REFERENCE
        ).select_related("labeler")
    }
    mine = set(
        Assignment.objects.filter(item__batch=batch, labeler=request.user, is_reference=True).values_list(
            "item_id", flat=True
        )
    )
    rows = []
    for item in items:
        order = [answer.pk for answer in item.answers.all()]
        names = slot_names(batch.template, len(order))
        rows.append(
            {
                "item": item,
                "answers": list(zip(names, item.answers.all(), strict=True)),
                "reference": reference_lines(batch.template, batch.preset, item.gold_expected or {}, order),
                "entered_by": references[item.pk].labeler if item.pk in references else None,
                "mine": item.pk in mine,
            }
        )
    context = {
        "batch": batch,
        "rows": rows,
        "total": listed.count(),
        "error": error,
        "max_explanation": MAX_EXPLANATION,
    }
    return render(request, "console/feedback_gold.html", context, status=status)


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def gold_page(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the batch's gold items with their references; POST ``item`` and ``explanation``: the
    explanation a labeler who disagreed with the reference reads on "My quality"."""
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    if request.method == "GET":
        return _gold_page(request, batch)
    item = gold_items(batch).filter(pk=parse_id(request.POST.get("item"))).first()
    if item is None:
        return _gold_page(request, batch, "No such gold item in this batch. Nothing was saved.", 400)
    explanation = request.POST.get("explanation", "").strip()
    if "\x00" in explanation or len(explanation) > MAX_EXPLANATION:
        problem = f"An explanation is at most {MAX_EXPLANATION} characters of text. Nothing was saved."
        return _gold_page(request, batch, problem, 400)
    item.gold_explanation = explanation
    item.save(update_fields=["gold_explanation"])
    log_action(request.user, "gold.explanation", item, batch=batch.pk, length=len(explanation))
    messages.success(request, f"Explanation of item {item.pk} saved.")
    return redirect(reverse("console:feedback_gold", args=[batch.pk]) + f"#item-{item.pk}")


@require_POST
@role_required(Role.RESEARCHER)
def reference_start(request: HttpRequest, pk: int) -> HttpResponse:
    """Open (or reopen) the researcher's reference task on ``item`` of the batch: the normal task page."""
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    item = FeedbackItem.objects.filter(batch=batch, pk=parse_id(request.POST.get("item"))).first()
    if item is None:
        return _gold_page(request, batch, "No such item in this batch. Nothing was started.", 400)
    try:
        task = start_reference(item, request.user)
    except ReferenceError as exc:
        messages.error(request, str(exc))
        return redirect("console:feedback_gold", pk=batch.pk)
    return redirect("annotation:task", pk=task.pk)


@require_POST
@role_required(Role.RESEARCHER)
def episode_review(request: HttpRequest, pk: int) -> HttpResponse:
    """A researcher's grade (1-7) and comment on a finished demonstration; theirs is replaced."""
    episode = get_visible_or_404(Episode.objects.select_related("batch"), request.user, pk=pk)
    try:
        grade = parse_grade(request.POST.get("grade"))
        save_review(episode, request.user, grade, request.POST.get("comment", ""))
    except ReviewError as exc:
        messages.error(request, f"{exc} Nothing was saved.")
    else:
        messages.success(request, "Review saved: the demonstrator sees it on their quality page.")
    return redirect(reverse("annotation:episode", args=[episode.pk]) + "#review")
