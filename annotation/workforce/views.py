"""The researcher's workforce pages: each kind of work's people by state, the paused, the screening
candidates with their scores against the cutoffs. Their decisions go to the team's ``person_state``."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.feedback.alpha_stats import alpha_text, template_alpha
from annotation.models import DEMONSTRATION, DemonstrationBatch, FeedbackBatch, Qualification, work_kind
from annotation.workforce.gold import accuracy_of, gold_checks, rolling_window
from annotation.workforce.screening import candidates_for
from annotation.workforce.signals import SIGNAL_LABELS, kind_template, signals_for_kind
from annotation.workforce.states import (
    State,
    all_kinds,
    kind_label,
)
from core.permissions import Role, role_required


def _screening_tests() -> dict[str, list]:
    tests: dict[str, list] = defaultdict(list)
    for batch in FeedbackBatch.objects.filter(is_screening=True):
        tests[work_kind(batch.template, batch.preset)].append(batch)
    tests[DEMONSTRATION] = list(DemonstrationBatch.objects.filter(is_screening=True))
    return tests


@require_GET
@role_required(Role.RESEARCHER)
def overview(request: HttpRequest) -> HttpResponse:
    """Per kind of work: how many people are in each state, its screening tests and who waits for a
    decision; then everyone paused, with the reason (an automatic pause names its figures)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for kind, state in Qualification.objects.values_list("kind", "state"):
        counts[kind][state] += 1
    tests = _screening_tests()
    kinds = []
    for kind in all_kinds():
        waiting = [c for c in candidates_for(kind) if c.state == State.APPLICANT] if tests.get(kind) else []
        kinds.append(
            {
                "kind": kind,
                "label": kind_label(kind),
                "counts": [
                    (state.label, counts[kind][state.value]) for state in State if state != State.APPLICANT
                ],
                "tests": tests.get(kind, []),
                "waiting": len(waiting),
            }
        )
    paused = Qualification.objects.filter(state=State.PAUSED).select_related("user").order_by("-decided_at")
    context = {
        "kinds": kinds,
        "paused": [(row, kind_label(row.kind)) for row in paused],
    }
    return render(request, "console/workforce.html", context)


@require_GET
@role_required(Role.RESEARCHER)
def candidates(request: HttpRequest, kind: str) -> HttpResponse:
    if kind not in all_kinds():
        raise Http404("No such kind of work.")
    rows = candidates_for(kind)
    context = {
        "kind": kind,
        "label": kind_label(kind),
        "candidates": rows,
        "tests": _screening_tests().get(kind, []),
    }
    return render(request, "console/candidates.html", context)


@require_GET
@role_required(Role.RESEARCHER)
def kind_page(request: HttpRequest, kind: str) -> HttpResponse:
    """One kind of feedback work: the agreement statistics of its production batches (Krippendorff's alpha
    with its bootstrap interval) and, per labeler, their state, rolling gold accuracy and the signals of
    careless work, each with its count and 95% interval; the notable ones are marked."""
    template = kind_template(kind)
    if template is None:
        raise Http404("No such kind of feedback work.")
    signals = signals_for_kind(kind)
    states = dict(Qualification.objects.filter(kind=kind).values_list("user_id", "state"))
    names = dict(get_user_model().objects.filter(pk__in=signals).values_list("pk", "username"))
    window = rolling_window(1)
    # Columns for the signals some labeler has (a labeler without shared items has no agreement: a blank).
    codes = [code for code in SIGNAL_LABELS if any(getattr(one, code) for one in signals.values())]
    rows = []
    for user_id, labeler in sorted(signals.items(), key=lambda pair: names.get(pair[0], "")):
        rows.append(
            {
                "user_id": user_id,
                "username": names.get(user_id, "?"),
                "state": states.get(user_id, State.APPLICANT),
                "submitted": labeler.submitted,
                "cells": [getattr(labeler, code) for code in codes],
                "gold": accuracy_of(gold_checks(user_id, kind)[-window:]),
            }
        )
    context = {
        "kind": kind,
        "label": kind_label(kind),
        "alpha": [(row, alpha_text(row)) for row in template_alpha(*template)],
        "rows": rows,
        "columns": [SIGNAL_LABELS[code] for code in codes],
        "window": window,
    }
    return render(request, "console/workforce_kind.html", context)
