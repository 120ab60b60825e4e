"""The researcher's team page (``console:team``) and each person's page (``console:team_person``): roles,
states per kind of work, gold accuracy, hours this week, last activity, the audit trail, and the actions
(each with its reason). A refused action is a 400 that shows the page again with the error: nothing was
changed. An action on someone the researcher may not act on (``authority``: their own account, another
researcher's, an administrator's) is a 403 that says why. A new invitation link is shown once, on the page
that answers its POST, never stored."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from annotation.models import QualificationEvent
from annotation.workforce import invitations
from annotation.workforce import team as people
from annotation.workforce.authority import NotYourCall, check_may_act_on, may_grant, refusal
from annotation.workforce.states import (
    ACTION_STATES,
    StateError,
    kind_label,
    qualify_for_role,
    set_state,
)
from annotation.workforce.team_forms import AddPersonForm, InviteForm, QualifyRoleForm, RoleForm, StateForm
from core.models import AuditEntry
from core.permissions import Role, get_visible_or_404, role_required

User = get_user_model()
EVENTS_SHOWN = 500
# The buttons offered for a state: each action whose target state the state allows (qualify and reinstate
# both lead to qualified: reinstate is the word for a paused person).
BUTTONS = {
    "applicant": ("qualify", "revoke"),
    "qualified": ("pause", "revoke"),
    "paused": ("reinstate", "revoke"),
    "revoked": ("qualify", "reset"),
}


def _team_page(request: HttpRequest, status: int = 200, error: str = "", **forms: Any) -> HttpResponse:
    context = {
        "error": error,
        "team": people.team(),
        "pending": invitations.pending(),
        "add_form": forms.get("add_form") or AddPersonForm(request.user),
        "invite_form": forms.get("invite_form") or InviteForm(request.user),
        "is_superuser": request.user.is_superuser,
    }
    return render(request, "console/team.html", context, status=status)


@require_GET
@role_required(Role.RESEARCHER)
def team_page(request: HttpRequest) -> HttpResponse:
    return _team_page(request)


def _link_page(request: HttpRequest, link: invitations.Link, account: Any = None) -> HttpResponse:
    url = request.build_absolute_uri(reverse("account:invite", args=[link.token]))
    response = render(
        request, "console/team_link.html", {"url": url, "invitation": link.invitation, "account": account}
    )
    add_never_cache_headers(response)  # the page holds the only copy of the link: no cache keeps it
    return response


@require_POST
@role_required(Role.RESEARCHER)
def add_person(request: HttpRequest) -> HttpResponse:
    """An account with an unusable password and the roles chosen, and its link (shown once)."""
    form = AddPersonForm(request.user, request.POST)
    if not form.is_valid():
        return _team_page(request, 400, add_form=form)
    data = form.cleaned_data
    roles = [Role(value) for value in data["roles"]]
    try:
        user, link = invitations.add_person(
            request.user, data["username"], data["email"], roles, data["days"]
        )
    except (invitations.InvitationError, people.RoleError) as error:
        form.add_error(getattr(error, "field", "") or None, str(error))
        return _team_page(request, 400, add_form=form)
    return _link_page(request, link, account=user)


@require_POST
@role_required(Role.RESEARCHER)
def invite(request: HttpRequest) -> HttpResponse:
    """An open invitation with the roles chosen, and its link (shown once)."""
    form = InviteForm(request.user, request.POST)
    if not form.is_valid():
        return _team_page(request, 400, invite_form=form)
    data = form.cleaned_data
    try:
        link = invitations.invite(request.user, [Role(v) for v in data["roles"]], data["note"], data["days"])
    except (invitations.InvitationError, people.RoleError) as error:
        form.add_error(getattr(error, "field", "") or None, str(error))
        return _team_page(request, 400, invite_form=form)
    return _link_page(request, link)


@require_POST
@login_required  # visibility decides: for anyone but researchers an invitation does not exist (404)
def withdraw_invitation(request: HttpRequest, pk: int) -> HttpResponse:
    """End a pending invitation: its link stops working. One already used, expired or withdrawn is a 404."""
    invitation = get_visible_or_404(invitations.valid(), request.user, pk=pk)
    try:
        invitations.withdraw(request.user, invitation.pk)
    except invitations.InvitationError:  # used or withdrawn since it was read
        raise Http404 from None
    except NotYourCall as refused:
        return _team_page(request, 403, f"{refused} Nothing was changed.")
    messages.success(request, "The invitation is withdrawn: its link no longer works.")
    return redirect("console:team")


def _who(event: QualificationEvent) -> str:
    if event.by is not None:
        return event.by.get_username()
    return str(event.figures.get("via", "automatic")) if isinstance(event.figures, dict) else "automatic"


def _person_page(request: HttpRequest, person: Any, status: int = 200, error: str = "") -> HttpResponse:
    member = people.member(person)
    gold = people.gold_by_kind(person, [state.kind for state in member.states])
    refused = refusal(request.user, person)
    rows = [
        {
            "state": state,
            "gold_text": gold.get(state.kind, ""),
            "buttons": () if refused else BUTTONS[state.state],
        }
        for state in member.states
    ]
    events = list(
        QualificationEvent.objects.filter(user=person)
        .select_related("by")
        .order_by("-at", "-id")[:EVENTS_SHOWN]
    )
    role_history = AuditEntry.objects.filter(
        object_type=User._meta.label, object_id=str(person.pk), action__startswith="team."
    ).select_related("actor")[:EVENTS_SHOWN]
    context = {
        "person": person,
        "member": member,
        "refusal": refused,  # why the actions are not offered: the researcher may not act on this account
        "rows": rows,
        "events": [
            {
                "event": event,
                "label": kind_label(event.kind),
                "who": _who(event),
                "figures": sorted(event.figures.items()) if isinstance(event.figures, dict) else [],
            }
            for event in events
        ],
        "role_history": role_history,
        # Not "roles": that is the layout's (the navigation's) context variable.
        "role_rows": [
            {"role": role, "has": role in member.roles, "may": not refused and may_grant(request.user, role)}
            for role in people.ROLE_ORDER
        ],
        "worker_roles": [] if refused else [role for role in people.WORKER_ROLES if role in member.roles],
        "needs_link": not refused and not person.has_usable_password(),
        "error": error,
    }
    return render(request, "console/team_person.html", context, status=status)


@require_GET
@role_required(Role.RESEARCHER)
def person_page(request: HttpRequest, pk: int) -> HttpResponse:
    return _person_page(request, get_object_or_404(User, pk=pk))


def _form_error(form: Any) -> str:
    return " ".join(str(message) for errors in form.errors.values() for message in errors)


def _refused(request: HttpRequest, person: Any) -> HttpResponse | None:
    """The person's page with why, as a 403, when the researcher may not act on this person; else None."""
    try:
        check_may_act_on(request.user, person)
    except NotYourCall as refused:
        return _person_page(request, person, 403, f"{refused} Nothing was changed.")
    return None


@require_POST
@role_required(Role.RESEARCHER)
def person_state(request: HttpRequest, pk: int) -> HttpResponse:
    """Qualify, pause, reinstate, revoke or reset one kind of work, with the reason."""
    person = get_object_or_404(User, pk=pk)
    if refused := _refused(request, person):
        return refused
    form = StateForm(request.POST)
    if not form.is_valid():
        return _person_page(request, person, 400, _form_error(form) + " Nothing was changed.")
    data = form.cleaned_data
    try:
        set_state(
            person,
            data["kind"],
            ACTION_STATES[data["action"]],
            by=request.user,
            reason=data["reason"],
            exclude_work=data["exclude_work"],
            action=data["action"],
        )
    except StateError as error:
        return _person_page(request, person, 400, f"{error} Nothing was changed.")
    messages.success(
        request,
        f"{kind_label(data['kind'])}: {person.get_username()} is now {ACTION_STATES[data['action']]}.",
    )
    # The workforce and candidates pages decide here too, and come back to where the decision was made.
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        return redirect(back)
    return redirect("console:team_person", pk=person.pk)


@require_POST
@role_required(Role.RESEARCHER)
def person_qualify_role(request: HttpRequest, pk: int) -> HttpResponse:
    """Qualify for every kind of one role's work (those already qualified are left alone)."""
    person = get_object_or_404(User, pk=pk)
    if refused := _refused(request, person):
        return refused
    form = QualifyRoleForm(request.POST)
    if not form.is_valid():
        return _person_page(request, person, 400, _form_error(form) + " Nothing was changed.")
    role = Role(form.cleaned_data["role"])
    try:
        qualify_for_role(person, role, by=request.user, reason=form.cleaned_data["reason"])
    except StateError as error:
        return _person_page(request, person, 400, f"{error} Nothing was changed.")
    messages.success(request, f"{person.get_username()} is qualified for every kind of {role.value} work.")
    return redirect("console:team_person", pk=person.pk)


@require_POST
@role_required(Role.RESEARCHER)
def person_roles(request: HttpRequest, pk: int) -> HttpResponse:
    """Grant or remove one role (the researcher role: superusers only)."""
    person = get_object_or_404(User, pk=pk)
    if refused := _refused(request, person):
        return refused
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _person_page(request, person, 400, _form_error(form) + " Nothing was changed.")
    role, grant = Role(form.cleaned_data["role"]), form.cleaned_data["action"] == "grant"
    try:
        changed = (people.grant_role if grant else people.remove_role)(request.user, person, role)
    except people.RoleError as error:
        return _person_page(request, person, 403, f"{error} Nothing was changed.")
    name = person.get_username()
    if not changed:
        messages.info(
            request, f"{name} {'had' if grant else 'did not have'} the {role.value} role: nothing changed."
        )
    elif grant:
        messages.success(
            request, f"{name} has the {role.value} role (an applicant for its work until qualified)."
        )
    else:
        messages.success(request, f"{name} no longer has the {role.value} role; their states and work stay.")
    return redirect("console:team_person", pk=person.pk)


@require_POST
@role_required(Role.RESEARCHER)
def person_link(request: HttpRequest, pk: int) -> HttpResponse:
    """A new link for an account without a password (earlier unused links of it end now)."""
    person = get_object_or_404(User, pk=pk)
    if refused := _refused(request, person):
        return refused
    try:
        link = invitations.renew(request.user, person)
    except invitations.InvitationError as error:
        return _person_page(request, person, 400, f"{error} Nothing was changed.")
    return _link_page(request, link, account=person)
