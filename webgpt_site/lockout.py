"""A right password clears only its own count.

django-axes counts failures per username and per address. Its own reset on success deletes every attempt
that matches either, so a success from an address also wiped the failures counted there against other
usernames: anyone with an account could then guess anyone else's password without limit, signing in as
themselves between guesses. Here a sign-in forgets only the failures for that username from that address
(the person's own typos); failures against the account from elsewhere, and other accounts' failures from
this address, keep counting.
"""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt
from django.contrib.auth.signals import user_logged_in
from django.http import HttpRequest


def forget_own_failures(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    address = getattr(request, "axes_ip_address", None)  # set by axes on its sign-in forms only
    if address is None:
        return  # force_login, or a sign-in that axes did not count: nothing of it to forget
    AccessAttempt.objects.filter(username=user.get_username(), ip_address=address).delete()


def connect() -> None:
    user_logged_in.connect(forget_own_failures, dispatch_uid="webgpt_site.lockout.forget_own_failures")
