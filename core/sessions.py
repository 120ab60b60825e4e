"""The idle timeout counts what a person does, not what an open page polls.

Every request renews the session (``SESSION_SAVE_EVERY_REQUEST``; at most once a minute, see
``RENEW_SECONDS``), but pages that watch a job or the
queues re-fetch themselves every few seconds whether anyone is there or not: an untouched tab kept its
session forever, whatever ``SESSION_IDLE_MINUTES`` said. Those polls send ``X-Poll`` (the ``hx-headers``
of each polling element), and a poll that changed nothing in the session leaves its expiry as it was. A
poll after the session ended is sent to the sign-in page as a whole page (``HX-Redirect``), not swapped
into the part of the page that polled. Heartbeats of the work pages are not polls: they are sent only
while the person types, clicks or moves the mouse.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils.cache import patch_vary_headers

POLL_HEADER = "X-Poll"


def is_poll(request: HttpRequest) -> bool:
    return request.headers.get(POLL_HEADER) == "1"


# The session's expiry moves at most once a minute: renewing it on every request wrote the session row
# (an UPDATE and a signed cookie) for each draft and heartbeat, about a fifth of a request's database time,
# to move an hours-long timeout by seconds.
RENEW_SECONDS = 60
RENEWED = "_renewed_at"


class IdleSessionMiddleware(SessionMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        session = getattr(request, "session", None)
        if session is not None and not is_poll(request) and not session.modified and not session.is_empty():
            if time.time() - session.get(RENEWED, 0) < RENEW_SECONDS:
                if session.accessed:
                    patch_vary_headers(response, ("Cookie",))
                return response  # renewed under a minute ago: the expiry stays (at most a minute early)
            session[RENEWED] = time.time()  # saved below, with the renewed expiry
        if session is None or not is_poll(request) or session.modified:
            return super().process_response(request, response)
        if _to_sign_in(response):
            # htmx would follow the redirect itself and put the sign-in form inside the polled box; the
            # whole page goes there instead, and comes back to the page that polled.
            page = urlsplit(request.headers.get("HX-Current-URL", ""))
            back = f"{page.path}?{page.query}" if page.query else page.path
            response = HttpResponse(status=200)
            response["HX-Redirect"] = redirect_to_login(back or request.get_full_path())["Location"]
        if session.accessed:
            patch_vary_headers(response, ("Cookie",))
        return response  # not saved: its expiry stays where the last real request put it


def _to_sign_in(response: HttpResponse) -> bool:
    location = response.get("Location", "") if response.status_code == 302 else ""
    return location.split("?")[0] == resolve_url(settings.LOGIN_URL)
