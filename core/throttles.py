"""API throttles: per signed-in user. No API endpoint answers anonymous callers (each is a 401 before any
throttle), so there is no throttle per anonymous address; the sign-in forms have their lockout.

DRF's own classes copy the rates when they are imported; these read ``DEFAULT_THROTTLE_RATES`` on every
request, so a changed setting (a test's override) takes effect at once. Counters live in the default
cache: per process unless ``CACHE_URL`` points at Redis (then shared by every web worker).
"""

from __future__ import annotations

from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, UserRateThrottle


class _RateFromSettings:
    scope: str

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class UserThrottle(_RateFromSettings, UserRateThrottle):
    """Every call of a signed-in user (token or session), whatever the endpoint."""


def client_address(request: HttpRequest) -> str:
    """The client's address for the login lockout, by DRF's rule (``NUM_PROXIES``, from
    ``TRUSTED_PROXIES``): ``REMOTE_ADDR``, or behind n trusted proxies the n-th ``X-Forwarded-For`` entry
    from the right (the one our own proxy wrote; entries further left are the client's to forge)."""
    return BaseThrottle().get_ident(request)
