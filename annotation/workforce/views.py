"""The researcher's workforce pages: each kind of work's people by state, the paused, the screening
candidates with their scores against the cutoffs, and the decisions (qualify, pause, reinstate, revoke)."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from annotation.models import DEMONSTRATION, DemonstrationBatch, FeedbackBatch, Qualification, work_kind
from annotation.workforce.screening import candidates_for
from annotation.workforce.states import (
    ACTION_STATES,
    State,
    StateError,
    all_kinds,
    kind_label,
    set_state,
)
from webgpt_site.inputs import parse_id
from webgpt_site.permissions import Role, role_required

MAX_REASON = 2000


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


@require_POST
@role_required(Role.RESEARCHER)
def decide(request: HttpRequest) -> HttpResponse:
    """One decision on one person's kind of work, with its reason: qualify, pause, reinstate, revoke (and,
    with a revocation, their work of that kind so far out of exports), or back to applicant."""
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        back = ""
    user = get_user_model().objects.filter(pk=parse_id(request.POST.get("user", ""))).first()
    kind, action = request.POST.get("kind", ""), request.POST.get("action", "")
    reason = request.POST.get("reason", "")[:MAX_REASON]
    if user is None or kind not in all_kinds() or action not in ACTION_STATES:
        messages.error(request, "Choose a person, a kind of work and a decision. Nothing was changed.")
        return redirect(back or "console:workforce")
    try:
        set_state(
            user,
            kind,
            ACTION_STATES[action],
            by=request.user,
            reason=reason,
            exclude_work=request.POST.get("exclude_work") == "on",
        )
    except StateError as exc:
        messages.error(request, f"{exc} Nothing was changed.")
    else:
        messages.success(
            request,
            f"{user.get_username()}: {kind_label(kind)} is now {ACTION_STATES[action].label.lower()}.",
        )
    return redirect(back or "console:workforce")
