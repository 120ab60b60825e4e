"""The sign-in lockout's two counts, and a right password that clears only its own.

Per username, ``AXES_FAILURE_LIMIT`` (``LOGIN_FAILURE_LIMIT``, 5) failures lock the account; per address,
``LOGIN_FAILURES_PER_ADDRESS`` (50) lock the address. An address has its own, larger limit because a whole
office of labelers often signs in from one: with the username's limit, five typos from anyone there locked
everyone out.

django-axes counts failures per username and per address. Its own reset on success deletes every attempt
that matches either, so a success from an address also wiped the failures counted there against other
usernames: anyone with an account could then guess anyone else's password without limit, signing in as
themselves between guesses. Here a sign-in forgets only the failures for that username from that address
(the person's own typos); failures against the account from elsewhere, and other accounts' failures from
this address, keep counting.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.db.models import Sum
from django.http import HttpRequest


class LockoutHandler(AxesDatabaseHandler):
    """django-axes' database handler with a limit per address of its own (``AXES_HANDLER``)."""

    def get_failures(self, request: HttpRequest, credentials: dict | None = None) -> int:
        # One query set per AXES_LOCKOUT_PARAMETERS entry, in its order: username, then address.
        by_username, by_address = (
            attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        # axes compares this one number with the username's limit (when a sign-in starts and after each
        # failure): the address's count is moved by the difference, so it reaches that limit exactly when
        # the address reaches its own.
        shift = settings.LOGIN_FAILURES_PER_ADDRESS - settings.AXES_FAILURE_LIMIT
        return max(by_username, by_address - shift)


def forget_own_failures(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    address = getattr(request, "axes_ip_address", None)  # set by axes on its sign-in forms only
    if address is None:
        return  # force_login, or a sign-in that axes did not count: nothing of it to forget
    AccessAttempt.objects.filter(username=user.get_username(), ip_address=address).delete()


def connect() -> None:
    user_logged_in.connect(forget_own_failures, dispatch_uid="core.lockout.forget_own_failures")
