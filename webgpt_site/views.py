"""Pages every signed-in person sees: the home page that routes each role to its work."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from webgpt_site.permissions import landing_url


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """One role: straight to its work. Several roles: a choice. None: how to get one."""
    target = landing_url(request.user)
    if target:
        return redirect(target)
    return render(request, "home.html")
