"""The researcher's workforce pages: each kind of work's people by state, the paused, the screening
candidates with their scores against the cutoffs. Their decisions go to the team's ``person_state``."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.models import DEMONSTRATION, DemonstrationBatch, FeedbackBatch, Qualification, work_kind
from annotation.workforce.screening import candidates_for
from annotation.workforce.states import (
    State,
    all_kinds,
    kind_label,
)
from webgpt_site.permissions import Role, role_required


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
