"""Who may act on whose account: grant or remove a role, change a state, issue or withdraw an invitation
link, correct a time sheet. One rule for every door (the team page, the team API, invitations, time sheets):

- a researcher grants and removes the labeler and demonstrator roles; the researcher role only a superuser
  (it opens the whole console, the exports and the team page: one researcher must not make another);
- one acts on a person only where one could grant every role they hold, and on staff and superuser accounts
  only as a superuser: a new link for an account without a password hands the account to whoever opens it,
  so a researcher issuing one for an administrator (``createsuperuser --noinput`` leaves no password) would
  take it over;
- nobody acts on their own account (separation of duties): one's own roles, states and hours are someone
  else's call, and the audit trail names them.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied

from core.permissions import AnyUser, Role, user_roles

# The roles a researcher who is not a superuser may grant and remove.
RESEARCHER_GRANTS = frozenset({Role.LABELER, Role.DEMONSTRATOR})


class NotYourCall(PermissionDenied):
    """Refused by the rule above; the message says why and who may. A 403 from every door (the API's
    handler turns it into ``{"detail": message}``); nothing was changed."""


def _is_superuser(user: AnyUser | None) -> bool:
    return bool(getattr(user, "is_superuser", False))


def may_grant(actor: AnyUser | None, role: Role) -> bool:
    """Researchers grant and remove labeler and demonstrator; the researcher role is a superuser's call."""
    return _is_superuser(actor) or role in RESEARCHER_GRANTS


def refusal(actor: AnyUser | None, target: AnyUser | None, roles: Iterable[Role] = ()) -> str:
    """Why ``actor`` may not act on ``target``'s account, or "" when they may. ``target`` None: an open
    invitation, judged by the ``roles`` it carries (withdrawing it acts on whoever would hold them)."""
    if actor is None or not actor.is_authenticated:
        return "Sign in first."
    boss = "another superuser" if _is_superuser(actor) else "a superuser"
    if target is not None and target.pk == actor.pk:
        return f"Nobody changes their own roles, states or time sheet: ask {boss}."
    if _is_superuser(actor):
        return ""
    whose = "This invitation carries"
    if target is not None:
        whose = f"{target.get_username()} has"
        if target.is_staff or target.is_superuser:
            return f"{target.get_username()} is a staff or superuser account: only a superuser may act on it."
        roles = [*user_roles(target), *roles]
    for role in roles:
        if not may_grant(actor, role):
            return f"{whose} the {role.value} role: only a superuser may act on it."
    return ""


def check_may_act_on(actor: AnyUser | None, target: AnyUser | None, roles: Iterable[Role] = ()) -> None:
    """``NotYourCall`` unless ``actor`` may act on ``target`` (None: an open invitation, judged by the
    ``roles`` it carries)."""
    reason = refusal(actor, target, roles)
    if reason:
        raise NotYourCall(reason)
