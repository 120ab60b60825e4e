"""API tokens for scripts, kept the way invitation links are: only a digest is stored.

A token is 32 random bytes (``secrets.token_urlsafe``, 43 characters), sent as ``Authorization: Token …``.
Only its SHA-256 is stored, and a token is looked up by it: the token is shown once, when it is made, and a
copy of the database opens nothing. A fast hash without salt is enough here, because guessing a token means
guessing 256 random bits (salted slow hashes are for passwords, which people choose). Tokens made before
(DRF's ``authtoken``, 40 hex characters in the clear) became digests in migration 0003 and still work.

One token a person: a new one replaces the old, which stops working at once. Tokens do not expire by
themselves; deactivating the account stops its token too.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from core.models import ApiToken, log_action

TOKEN_BYTES = 32
PREFIX_LENGTH = 6  # shown beside the token's date: enough to tell two apart, nothing to guess the rest from


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(user: Any, actor: Any = None) -> str:
    """A new token for ``user`` in place of theirs: the one moment it exists in the clear.

    ``actor`` is whoever asked, for the audit log (None from the command line); the log never holds the token.
    """
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic():
        ApiToken.objects.update_or_create(
            user=user,
            defaults={"digest": digest(token), "prefix": token[:PREFIX_LENGTH], "created_at": timezone.now()},
        )
        log_action(actor, "account.rotate_token", user)
    return token


def revoke(user: Any, actor: Any = None) -> bool:
    """End ``user``'s token; False when they had none."""
    with transaction.atomic():
        deleted, _ = ApiToken.objects.filter(user=user).delete()
        if deleted:
            log_action(actor, "account.revoke_token", user)
    return bool(deleted)


class DigestTokenAuthentication(TokenAuthentication):
    """DRF's ``Authorization: Token …`` header, checked against the stored digests."""

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        token = ApiToken.objects.select_related("user").filter(digest=digest(key)).first()
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return token.user, token
