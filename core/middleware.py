"""Response headers every page gets beyond Django's and the CSP's, and the site's own "not found" page."""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

# Browser features no page of ours uses, switched off for our pages and anything they might embed.
PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer", "autoplay", "camera", "display-capture", "geolocation", "gyroscope",
        "magnetometer", "microphone", "midi", "payment", "publickey-credentials-get", "usb",
        "screen-wake-lock", "serial", "xr-spatial-tracking",
    )
)  # fmt: skip


class PermissionsPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response


class NotFoundPageMiddleware:
    """A view's 404 (an object that does not exist, or that is not the caller's to see) is the site's own
    page, also under DEBUG: Django's debug page there names the model and the query, and ``make run`` is
    what a newcomer sees. (A URL that matches no route still gets Django's page under DEBUG, with the
    routes: that one helps a developer and says nothing about anyone's data.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404) and not request.path.startswith("/api/"):
            return render(request, "404.html", status=404)
        return None  # the API answers its own JSON 404s; anything else goes on as usual
