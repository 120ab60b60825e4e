"""A person's own API token: make or replace it (shown once, on the page that answers), or revoke it.

Later visits show only that a token exists (its first characters and its date): the token itself is not
stored (core/api_tokens.py). An administrator replaces or revokes anyone's with
``manage.py create_api_token``, or revokes one in the admin.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core import api_tokens
from core.models import ApiToken


def _page(request: HttpRequest, new_token: str = "") -> HttpResponse:
    existing = ApiToken.objects.filter(user=request.user).first()
    return render(request, "account/token.html", {"existing": existing, "new_token": new_token})


@require_GET
@login_required
def token_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@login_required
@never_cache  # the answer holds the only copy of the token: no cache keeps it
def token_rotate(request: HttpRequest) -> HttpResponse:
    # The page itself, not a redirect: the token must not outlive this one answer (a session or a
    # message cookie would keep it).
    return _page(request, new_token=api_tokens.issue(request.user, request.user))


@require_POST
@login_required
def token_revoke(request: HttpRequest) -> HttpResponse:
    revoked = api_tokens.revoke(request.user, request.user)
    messages.success(request, "Your token was revoked." if revoked else "You had no token.")
    return redirect("account:token")
