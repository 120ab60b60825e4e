"""The console's flag review page of a batch: each flagged judgement with its reasons, the answers as its
labeler saw them (A/B in the labeler's order) beside the response, and "Keep" / "Exclude from exports"
(decided through ``flag_review.decide``; htmx swaps the judgement, a plain form post comes back here)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.feedback import flag_review as review
from annotation.feedback.presenter import sent_back
from annotation.feedback.scales import (
    CITATION,
    CLAIM_RELEVANCE,
    CLAIM_SUPPORT,
    COMPARISON_SCALE,
    COMPARISON_TEMPLATES,
    QUESTION_FLAGS,
    TRUST_LEVELS,
    dimensions_for,
)
from annotation.models import Answer, Assignment, ClaimCheck, FeedbackBatch
from core.models import AuditEntry
from core.permissions import Role, get_visible_or_404, role_required

PAGE_SIZE = 20


class ShownForm(forms.Form):
    """Which judgements the page lists, and the page number (a number past the end shows the last page)."""

    show = forms.ChoiceField(choices=review.SHOWN, required=False)
    page = forms.IntegerField(min_value=1, max_value=1_000_000, required=False)

    def shown(self) -> tuple[str, int]:
        data = self.cleaned_data
        return data["show"] or review.DEFAULT_SHOWN, data["page"] or 1


def _section(value: Any, key: str) -> dict:
    part = value.get(key) if isinstance(value, Mapping) else None
    return part if isinstance(part, dict) else {}


def _claims(claims: Any, text: str, checks: Mapping[int, list[ClaimCheck]]) -> list[dict[str, Any]]:
    """The marked claims in words, each with the model judges' checks of it (``checks`` by claim number)."""
    support, relevance = dict(CLAIM_SUPPORT), dict(CLAIM_RELEVANCE)
    return [
        {
            "span": text[claim["start"] : claim["end"]],
            "support": support.get(claim.get("support"), claim.get("support")),
            "relevance": relevance.get(claim.get("relevance"), claim.get("relevance")),
            "quotes": [index + 1 for index in claim.get("quotes") or () if isinstance(index, int)],
            "checks": checks.get(number, []),
        }
        for number, claim in enumerate(claims if isinstance(claims, list) else ())
        if isinstance(claim, dict)
        and isinstance(claim.get("start"), int)
        and isinstance(claim.get("end"), int)
    ]


def _slots(
    task: Assignment, answers: Mapping[int, Answer], checks: Mapping[tuple[str, int], list[ClaimCheck]]
) -> list[dict[str, Any]]:
    """The answers in the labeler's order, as their page showed them, with what they marked on each (and
    the judges' claim checks: ``checks`` by (slot, claim number))."""
    template = task.item.batch.template
    minimal = template == "minimal_comparison"  # shown without citations and references
    trust_words = dict(TRUST_LEVELS)
    marked = _section(task.response, "answers")
    slots = []
    for position, answer_id in enumerate(task.order):
        answer = answers.get(answer_id)
        if answer is None:
            continue
        slot = "AB"[position] if template in COMPARISON_TEMPLATES and position < 2 else str(position + 1)
        text = CITATION.sub("", answer.text) if minimal else answer.text
        trust = _section(marked.get(slot), "trust")
        slots.append(
            {
                "slot": slot,
                "text": text,
                "quotes": []
                if minimal
                else [
                    {**quote, "trust": trust_words.get(trust.get(str(index)), "")}
                    for index, quote in enumerate(answer.quotes)
                    if isinstance(quote, dict)
                ],
                "claims": _claims(
                    _section(marked, slot).get("claims"),
                    text,
                    {claim: found for (where, claim), found in checks.items() if where == slot},
                ),
            }
        )
    return slots


def _ratings(task: Assignment) -> list[dict[str, Any]]:
    words, ratings = dict(COMPARISON_SCALE), _section(task.response, "ratings")
    return [
        {"code": code, "label": label, "value": words.get(ratings.get(code), "—")}
        for code, label in dimensions_for(task.item.batch.template)
    ]


def _history(task: Assignment, cleared: Iterable[AuditEntry]) -> list[dict[str, Any]]:
    """Every decision and every clearing by a revision, oldest first."""
    entries = [
        {
            "at": row.decided_at,
            "what": row.get_decision_display(),
            "who": row.reviewer.get_username() if row.reviewer else "—",
            "note": row.note,
        }
        for row in task.flag_reviews.all()
    ]
    entries += [
        {
            "at": entry.created_at,
            "what": "Back to not reviewed",
            "who": "the labeler",
            "note": entry.data.get("reason", ""),
        }
        for entry in cleared
    ]
    return sorted(entries, key=lambda entry: entry["at"])


def review_rows(tasks: Iterable[Assignment]) -> list[dict[str, Any]]:
    """What the page shows of each judgement, in a fixed number of queries for a whole page."""
    tasks = list(tasks)
    answers = Answer.objects.in_bulk([pk for task in tasks for pk in task.order if isinstance(pk, int)])
    cleared: dict[str, list[AuditEntry]] = defaultdict(list)
    for entry in AuditEntry.objects.filter(
        action=review.CLEARED,
        object_type=Assignment._meta.label,
        object_id__in=[str(task.pk) for task in tasks],
    ):
        cleared[entry.object_id].append(entry)
    checks: dict[int, dict[tuple[str, int], list[ClaimCheck]]] = defaultdict(lambda: defaultdict(list))
    for check in ClaimCheck.objects.filter(assignment__in=tasks).select_related("run").order_by("run_id"):
        checks[check.assignment_id][(check.slot, check.claim)].append(check)
    rows = []
    for task in tasks:
        slots = _slots(task, answers, checks[task.pk])
        texts = {slot["slot"]: slot["text"] for slot in slots}
        comparison = task.item.batch.template in COMPARISON_TEMPLATES
        response = task.response if isinstance(task.response, dict) else {}
        rows.append(
            {
                "task": task,
                "state": review.STATES.get(task.flag_decision, task.flag_decision),
                "reasons": review.reason_words(task.flags),
                "slots": slots,
                "ratings": _ratings(task) if comparison else [],
                "question_flags": [
                    label for code, label in QUESTION_FLAGS if _section(response, "flags").get(code)
                ],
                "comment": response.get("comment", "") if isinstance(response.get("comment"), str) else "",
                # Other templates have no flags today; their response is shown field by field.
                "fields": [] if comparison else sent_back(task.item.batch, response, texts),
                "history": _history(task, cleared[str(task.pk)]),
            }
        )
    return rows


def _page(batch: FeedbackBatch, show: str, number: int) -> Page:
    tasks = (
        review.shown(batch, show)
        .select_related("labeler", "item__batch", "item__question")
        .prefetch_related("flag_reviews__reviewer")
    )
    return Paginator(tasks, PAGE_SIZE).get_page(number)


def _page_response(
    request: HttpRequest,
    batch: FeedbackBatch,
    show: str,
    number: int,
    *,
    problem: str = "",
    status: int = 200,
) -> HttpResponse:
    page = _page(batch, show, number)
    context = {
        "batch": batch,
        "show": show,
        "shown_choices": review.SHOWN,
        "page": page,
        "rows": review_rows(page.object_list),
        "counts": review.flag_counts(batch),
        "problem": problem,
        "max_note": review.MAX_NOTE,
    }
    return render(request, "console/flag_review.html", context, status=status)


@require_GET
@role_required(Role.RESEARCHER)
def flags_page(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    form = ShownForm(request.GET)
    if not form.is_valid():
        problem = " ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        return _page_response(request, batch, review.DEFAULT_SHOWN, 1, problem=problem, status=400)
    return _page_response(request, batch, *form.shown())


@require_POST
@role_required(Role.RESEARCHER)
@vary_on_headers("HX-Request")
def decide(request: HttpRequest, pk: int) -> HttpResponse:
    """A decision on judgement ``pk``; the hidden ``show`` and ``page`` bring a plain post back to the
    list it came from (anything unusable there: the default list)."""
    task = get_object_or_404(Assignment.objects.visible_to(request.user).select_related("item__batch"), pk=pk)
    batch = task.item.batch
    form = ShownForm(request.POST)
    show, number = form.shown() if form.is_valid() else (review.DEFAULT_SHOWN, 1)
    problem = ""
    try:
        decision = review.decide(
            task.pk, request.user, request.POST.get("decision"), request.POST.get("note")
        )
    except review.FlagReviewError as exc:
        problem = f"{exc.message} Nothing was changed."
    if request.htmx:
        return _row_response(request, task.pk, show, number, problem)
    if problem:
        return _page_response(request, batch, show, number, problem=problem, status=400)
    messages.success(request, f"Judgement {task.pk}: {decision.get_decision_display().lower()}.")
    query = f"?show={show}&page={number}#flag-{task.pk}"
    return redirect(reverse("console:feedback_flags", args=[batch.pk]) + query)


def _row_response(request: HttpRequest, pk: int, show: str, number: int, problem: str) -> HttpResponse:
    """The judgement as it now is (with the refusal, if any), and the batch's counts out of band."""
    task = (
        Assignment.objects.select_related("labeler", "item__batch", "item__question")
        .prefetch_related("flag_reviews__reviewer")
        .get(pk=pk)
    )
    context = {
        "row": review_rows([task])[0],
        "counts": review.flag_counts(task.item.batch),
        "batch": task.item.batch,
        "show": show,
        "page_number": number,
        "row_problem": problem,
        "max_note": review.MAX_NOTE,
        "oob": True,
    }
    return render(request, "console/_flag_row.html", context, status=400 if problem else 200)
