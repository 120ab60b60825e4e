"""The invitation's page (``account:invite``, public): a valid link shows a form to choose a username (unless
the account exists) and a password; the account gets the invitation's roles and is signed in. Any other
link (unknown, expired, used) gets the same 410 page, which says nothing about which it was."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from annotation.workforce import invitations
from annotation.workforce.team_forms import AcceptForm

GONE = 410
BACKEND = "django.contrib.auth.backends.ModelBackend"


def _gone(request: HttpRequest) -> HttpResponse:
    return render(request, "account/invite_gone.html", status=GONE)


@require_http_methods(["GET", "POST"])
@never_cache
def accept(request: HttpRequest, token: str) -> HttpResponse:
    invitation = invitations.find(token)
    if invitation is None:
        return _gone(request)
    account = invitation.accepted_by
    form = AcceptForm(account, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            user = invitations.accept(invitation.pk, data.get("username", ""), data["password1"])
        except invitations.InvitationError as error:
            if not error.field:
                return _gone(request)
            form.add_error(error.field, error.message)
        else:
            login(request, user, backend=BACKEND)
            messages.success(request, f"Welcome, {user.get_username()}: your account is ready.")
            return redirect("home")
    status = 400 if request.method == "POST" else 200
    context = {"form": form, "account": account, "roles": invitation.roles}
    return render(request, "account/invite.html", context, status=status)
