"""Pages every signed-in person sees: the home page that routes each role to its work."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.http import require_GET

from core.permissions import landing_url


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """One role: straight to its work. Several roles: a choice. None: how to get one."""
    target = landing_url(request.user)
    if target:
        return redirect(target)
    return render(request, "home.html")


def locked_out(request: HttpRequest, response: HttpResponse | None, credentials: dict | None) -> HttpResponse:
    """django-axes' answer to a sign-in while the username or the address is locked out (429)."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    context = {
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "address_limit": settings.LOGIN_FAILURES_PER_ADDRESS,
        "minutes": minutes,
    }
    return render(request, "registration/locked_out.html", context, status=429)


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """For pages without our <link rel="icon"> (the admin, raw API responses): browsers ask /favicon.ico."""
    return redirect(static("favicon.svg"))
