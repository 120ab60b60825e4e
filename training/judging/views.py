"""Researcher pages for judge runs: "Judge this batch" (from the batch page) and a run's page: its judge,
prompt version and settings, live progress and counts, and each item's two verdicts (the drawn order and
its reverse) with the raw output and any error. Runs are jobs on the ``sampling`` queue; these pages only
read their rows and ask ``judging.runs`` to start or cancel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.feedback.scales import COMPARISON_SCALE, COMPARISON_TEMPLATES, dimensions_for, rating_fields
from annotation.models import Answer, FeedbackBatch
from annotation.models.judging import JudgeKind, JudgeRun, ModelJudgement
from core.permissions import Role, get_visible_or_404, role_required
from training.job_views import announce_request, cancel_unless_finished, shown
from training.judging.forms import JudgeForm
from training.judging.prompts import messages_for, shown_item, slot_names
from training.judging.reward import flat_reward_warning
from training.judging.runs import DEFAULTS, cancel_judge_run, request_judge_run

ITEMS_PER_PAGE = 25


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def judge_new(request: HttpRequest, pk: int) -> HttpResponse:
    """The "Judge this batch" form, and the run it starts (``pk``: the batch)."""
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    form = JudgeForm(request.POST or None, user=request.user, batch=batch)
    run = None
    if request.method == "POST" and form.is_valid():
        run = form.start(lambda: request_judge_run(request.user, form.judge_request()))
    if run is not None:
        announce_request(request, run, "Judge run")
        return redirect("training:judge_run", pk=run.pk)
    status = 400 if form.errors else 200
    return render(request, "training/judge_new.html", {"form": form, "batch": batch}, status=status)


@require_GET
@login_required  # visibility decides: for anyone but researchers a run does not exist (404)
@vary_on_headers("HX-Request")
def judge_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(JudgeRun.objects.select_related("owner", "batch"), request.user, pk=pk)
    context: dict[str, Any] = {"run": run, "metrics": run.metrics or {}}
    if request.htmx:
        response = render(request, "training/_judge_status.html", context)
        if run.is_finished:  # the last poll: reload once, so the verdicts below are all there
            response["HX-Refresh"] = "true"
        return response
    judged = run.judgements.order_by("item_id").values_list("item_id", flat=True).distinct()
    page = Paginator(judged, ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    context["page"] = page
    context["items"] = item_rows(run, list(page.object_list))
    context["prompt"] = prompt_text(run, context["items"])
    unused = set() if run.route else {"confidence_threshold", "audit_share"}  # routing's, when it is off
    context["settings"] = [
        (name, shown(value)) for name, value in sorted((run.settings or {}).items()) if name not in unused
    ]
    context["flat"] = flat_judge(run)
    return render(request, "training/judge_detail.html", context)


@require_POST
@login_required
def judge_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(JudgeRun.objects, request.user, pk=pk)
    cancel_unless_finished(request, run, "Judge run", cancel_judge_run)
    return redirect("training:judge_run", pk=run.pk)


def item_rows(run: JudgeRun, item_ids: Sequence[int]) -> list[dict[str, Any]]:
    """Each item's question and its verdicts (drawn order first), each with the answers in the order shown
    and the response in words: a fixed number of queries for a page."""
    judgements = list(
        ModelJudgement.objects.filter(run=run, item_id__in=item_ids)
        .select_related("item__question")
        .order_by("item_id", "swapped")
    )
    answers = Answer.objects.in_bulk(
        [pk for judgement in judgements for pk in judgement.order if isinstance(pk, int)]
    )
    rows: dict[int, dict[str, Any]] = {}
    for judgement in judgements:
        row = rows.setdefault(
            judgement.item_id, {"item": judgement.item, "question": judgement.item.question, "verdicts": []}
        )
        row["verdicts"].append(verdict_view(run.batch, judgement, answers))
    return list(rows.values())


def prompt_text(run: JudgeRun, rows: Sequence[dict[str, Any]]) -> str:
    """The prompt as sent for the page's first item in its drawn order ("" for a reward model's run)."""
    if not run.prompt_version or not rows:
        return ""
    judgement = rows[0]["verdicts"][0]["judgement"]
    answers = Answer.objects.in_bulk([pk for pk in judgement.order if isinstance(pk, int)])
    shown = [(answers[pk].text, answers[pk].quotes) for pk in judgement.order if pk in answers]
    batch = run.batch
    item = shown_item(batch.template, batch.preset, judgement.item.question.text, shown)
    try:
        messages = messages_for(run.prompt_version, item)
    except ValueError:  # a version this code no longer has
        return ""
    return "\n\n".join(f"[{message.role}]\n{message.content}" for message in messages)


def verdict_view(
    batch: FeedbackBatch, judgement: ModelJudgement, answers: dict[int, Answer]
) -> dict[str, Any]:
    order = [pk for pk in judgement.order if isinstance(pk, int)]
    slots = slot_names(len(order), batch.template)
    return {
        "judgement": judgement,
        "shown": [
            {"slot": slot, "answer": pk, "text": answers[pk].text if pk in answers else ""}
            for slot, pk in zip(slots, order, strict=True)
        ],
        "fields": response_words(batch, judgement.response),
    }


def response_words(batch: FeedbackBatch, response: Any) -> list[tuple[str, str]]:
    """A judgement's response as (field, value) rows in the task page's words."""
    if not isinstance(response, dict):
        return []
    rows: list[tuple[str, str]] = []
    flags = [code for code, on in (response.get("flags") or {}).items() if on]
    if flags:
        rows.append(("Question flags", ", ".join(flags)))
    scale = dict(COMPARISON_SCALE)
    ratings = response.get("ratings") or {}
    rows += [
        (label, scale.get(ratings[code], ratings[code]))
        for code, label in dimensions_for(batch.template)
        if code in ratings
    ]
    ranks = response.get("ranks") or {}
    rows += [(f"Rank of answer {slot}", str(rank)) for slot, rank in sorted(ranks.items(), key=_slot_key)]
    for field in rating_fields(batch.preset or None):
        if field.code in response:
            value = response[field.code]
            rows.append((field.label, dict(field.choices).get(value, value) if field.choices else value))
    if response.get("comment"):
        rows.append(("Comment", response["comment"]))
    return rows


def _slot_key(entry: tuple[str, Any]) -> int:
    return int(entry[0]) if str(entry[0]).isdecimal() else 0


def flat_judge(run: JudgeRun) -> dict[str, float] | None:
    """A reward-model judge of comparisons whose score differences sit within its tie margin almost always
    (``reward.flat_reward_warning``), for the page's warning; None otherwise."""
    if run.judge_kind != JudgeKind.REWARD_MODEL or run.batch.template not in COMPARISON_TEMPLATES:
        return None
    pairs = [
        tuple(scores.values())
        for scores in (
            details.get("scores") or {} for details in run.judgements.values_list("details", flat=True)
        )
        if len(scores) == 2
    ]
    return flat_reward_warning(pairs, float((run.settings or {}).get("tie_margin", DEFAULTS["tie_margin"])))
