"""Invitations to the team: a link that lets one person make an account with the given roles (or set the
password of an account a researcher made for them), until it expires or is used.

The token is 32 random bytes (``secrets.token_urlsafe``); only its SHA-256 is stored, so the link is shown
once, when it is made, and a copy of the database opens nothing. A token is looked up by its hash: guessing
one means guessing 256 bits, so the accept page needs no rate limit of its own.

Two sorts of invitation share the model:

- an open invitation (``accepted_by`` empty until used) carries its roles: the person chooses a username and
  a password, and the account gets the roles;
- an invitation for an account a researcher made ("Add a person": the account has its roles and an unusable
  password) names that account in ``accepted_by`` from the start and carries no roles: the person only
  chooses a password. ``accepted_at`` says whether either was used. An invitation with neither an account
  nor a role (its account was deleted) opens nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import Invitation
from annotation.workforce.authority import check_may_act_on
from annotation.workforce.team import check_roles
from core.api_tokens import digest
from core.models import log_action
from core.permissions import AnyUser, Role

User = get_user_model()
TOKEN_BYTES = 32
MAX_TOKEN_LENGTH = 64  # token_urlsafe(32) is 43 characters: anything longer is no token of ours
DEFAULT_DAYS, MIN_DAYS, MAX_DAYS = 7, 1, 30


class InvitationError(ValueError):
    """What is wrong with a request about an invitation, in words for the person who sent it."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass(frozen=True)
class Link:
    """A new invitation and its token: the only moment the token exists outside the link."""

    invitation: Invitation
    token: str


def _new(
    actor: AnyUser, roles: list[str], note: str, days: int, account: AnyUser | None, now: datetime
) -> Link:
    if not MIN_DAYS <= days <= MAX_DAYS:
        raise InvitationError(f"A link lasts {MIN_DAYS} to {MAX_DAYS} days.", "days")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    invitation = Invitation.objects.create(
        token_hash=digest(token),
        roles=roles,
        note=note,
        expires_at=now + timedelta(days=days),
        created_by=actor if actor.is_authenticated else None,
        accepted_by=account,
    )
    return Link(invitation, token)


def invite(actor: AnyUser, roles: Iterable[Role], note: str = "", days: int = DEFAULT_DAYS) -> Link:
    """An open invitation: whoever has the link makes an account with ``roles`` (at least one)."""
    roles = list(dict.fromkeys(roles))
    if not roles:
        raise InvitationError("Choose at least one role for the person invited.", "roles")
    check_roles(actor, roles)
    with transaction.atomic():
        link = _new(actor, [role.value for role in roles], note.strip(), days, None, timezone.now())
        log_action(actor, "team.invite", link.invitation, roles=link.invitation.roles, note=note, days=days)
    return link


def add_person(
    actor: AnyUser, username: str, email: str, roles: Iterable[Role], days: int = DEFAULT_DAYS
) -> tuple[AnyUser, Link]:
    """An account with ``roles`` and an unusable password, and the link with which its person sets one.
    The username is checked by the caller's form (Django's rules); a taken one is an InvitationError."""
    roles = list(dict.fromkeys(roles))
    check_roles(actor, roles)
    if User.objects.filter(username__iexact=username).exists():
        raise InvitationError(f"The username {username!r} is taken.", "username")
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email)  # no password: unusable
            for role in roles:
                user.groups.add(Group.objects.get_or_create(name=role.value)[0])
            link = _new(actor, [], f"account {username}", days, user, timezone.now())
            log_action(actor, "team.add_person", user, roles=[role.value for role in roles], days=days)
    except IntegrityError:  # made at the same moment by someone else
        raise InvitationError(f"The username {username!r} is taken.", "username") from None
    return user, link


def renew(actor: AnyUser, user: AnyUser, days: int = DEFAULT_DAYS) -> Link:
    """A new link for an account without a password (the first expired); earlier unused links end now.
    Whoever opens the link sets the password, so it is issued only by someone who may act on the account
    (``authority``: never for an administrator by a researcher); else ``authority.NotYourCall``."""
    check_may_act_on(actor, user)
    if user.has_usable_password():
        raise InvitationError(f"{user.get_username()} has a password already: they sign in with it.")
    now = timezone.now()
    with transaction.atomic():
        Invitation.objects.filter(accepted_by=user, accepted_at__isnull=True, expires_at__gt=now).update(
            expires_at=now
        )
        link = _new(actor, [], f"account {user.get_username()}", days, user, now)
        log_action(actor, "team.renew_invitation", user, days=days)
    return link


def withdraw(actor: AnyUser, invitation_id: int) -> Invitation:
    """End a pending invitation now (an open one, or an account's link): its link opens nothing from then
    on, like an expired one. The row stays, with the audit entry. InvitationError when it was used, expired
    or withdrawn meanwhile; an account whose link is withdrawn keeps its roles and may get a new link.
    ``authority.NotYourCall`` when ``actor`` may not act on its account or grant its roles."""
    now = timezone.now()
    with transaction.atomic():
        # Under the row's lock: an accept at the same moment either comes first (then this refuses) or
        # finds the invitation ended.
        invitation = valid(now).select_for_update().filter(pk=invitation_id).first()
        if invitation is None:
            raise InvitationError("This invitation was used, has expired or was withdrawn.")
        check_may_act_on(actor, invitation.accepted_by, _roles(invitation))
        invitation.expires_at = now
        invitation.save(update_fields=["expires_at"])
        account = invitation.accepted_by.get_username() if invitation.accepted_by else None
        log_action(
            actor,
            "team.withdraw_invitation",
            invitation,
            roles=invitation.roles,
            note=invitation.note,
            account=account,
        )
    return invitation


def _roles(invitation: Invitation) -> list[Role]:
    """The roles an open invitation carries (``invite`` stores nothing else)."""
    return [Role(name) for name in invitation.roles if name in {role.value for role in Role}]


def valid(now: datetime | None = None) -> QuerySet[Invitation]:
    """The invitations that still open something: unused, unexpired, with an account or a role."""
    rows = Invitation.objects.filter(accepted_at__isnull=True, expires_at__gt=now or timezone.now())
    return rows.exclude(accepted_by__isnull=True, roles=[])


def find(token: str) -> Invitation | None:
    """The valid invitation the token opens, or None (unknown, expired, used: the page says the same)."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return valid().select_related("accepted_by").filter(token_hash=digest(token)).first()


def pending() -> list[Invitation]:
    """Open invitations and accounts' links still waiting, newest first (for the team page)."""
    return list(valid().select_related("accepted_by", "created_by"))


def accept(invitation_id: int, username: str, password: str) -> AnyUser:
    """Use the invitation: set the password of its account, or make one with its roles. The password is
    checked by the caller's form (Django's validators). InvitationError when it was used or expired in the
    meantime, or the username is taken."""
    with transaction.atomic():
        invitation = valid().select_for_update().filter(pk=invitation_id).first()
        if invitation is None:
            raise InvitationError("This invitation link has expired or was used.")
        user = invitation.accepted_by
        if user is not None:
            if not user.is_active:
                raise InvitationError("This invitation link has expired or was used.")
            user.set_password(password)
            user.save(update_fields=["password"])
        else:
            if User.objects.filter(username__iexact=username).exists():
                raise InvitationError(f"The username {username!r} is taken: choose another.", "username")
            try:
                with transaction.atomic():
                    user = User.objects.create_user(username=username, password=password)
            except IntegrityError:
                raise InvitationError(
                    f"The username {username!r} is taken: choose another.", "username"
                ) from None
            for role in _roles(invitation):
                user.groups.add(Group.objects.get_or_create(name=role.value)[0])
        invitation.accepted_by, invitation.accepted_at = user, timezone.now()
        invitation.save(update_fields=["accepted_by", "accepted_at"])
        log_action(user, "team.accept_invitation", invitation, roles=invitation.roles)
    return user
