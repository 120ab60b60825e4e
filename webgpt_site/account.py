"""A person's own API token: see it, replace it (the old one stops working at once), or revoke it.

Tokens do not expire by themselves: one works until it is rotated or revoked here, the account is
deactivated, or an administrator deletes it (admin, or ``manage.py drf_create_token -r USER`` to replace).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from rest_framework.authtoken.models import Token

from webgpt_site.models import log_action


@require_GET
@login_required
@never_cache  # the page shows a secret: no copy in any cache
def token_page(request: HttpRequest) -> HttpResponse:
    return render(request, "account/token.html", {"token": Token.objects.filter(user=request.user).first()})


@require_POST
@login_required
def token_rotate(request: HttpRequest) -> HttpResponse:
    with transaction.atomic():
        Token.objects.filter(user=request.user).delete()
        Token.objects.create(user=request.user)
        # Never the token itself in the audit log: its primary key is the secret.
        log_action(request.user, "account.rotate_token")
    messages.success(request, "A new token was created. The old one no longer works.")
    return redirect("account:token")


@require_POST
@login_required
def token_revoke(request: HttpRequest) -> HttpResponse:
    with transaction.atomic():
        deleted, _ = Token.objects.filter(user=request.user).delete()
        if deleted:
            log_action(request.user, "account.revoke_token")
    messages.success(request, "Your token was revoked." if deleted else "You had no token.")
    return redirect("account:token")
