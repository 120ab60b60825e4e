"""Who may do what: roles, the view decorator and object lookups. Every access check lives here.

Roles are Django groups. Staff users (admins) may use the researcher console too. Object access goes
through each model's ``visible_to(user)`` queryset, and views fetch objects with ``get_visible_or_404``:
an object a user may not see is answered exactly like one that does not exist (404), so URLs leak
nothing about other people's work.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse

AnyUser = AbstractBaseUser | AnonymousUser
M = TypeVar("M", bound=Model)


class Role(StrEnum):
    DEMONSTRATOR = "demonstrator"
    LABELER = "labeler"
    RESEARCHER = "researcher"


# Where each role's work starts, in the order the home page offers them.
ROLE_LANDING = {
    Role.RESEARCHER: "console:home",
    Role.LABELER: "annotation:next_task",
    Role.DEMONSTRATOR: "annotation:next_question",
}


def user_roles(user: AnyUser) -> frozenset[Role]:
    """The user's roles, cached on the user object for the request."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_webgpt_roles", None)
    if cached is None:
        names = set(user.groups.values_list("name", flat=True))
        roles = {role for role in Role if role.value in names}
        if user.is_staff:
            roles.add(Role.RESEARCHER)
        cached = frozenset(roles)
        user._webgpt_roles = cached
    return cached


def has_role(user: AnyUser, role: Role) -> bool:
    return role in user_roles(user)


def landing_url(user: AnyUser) -> str | None:
    """The page a user's work starts on, when they have exactly one role."""
    roles = [role for role in ROLE_LANDING if has_role(user, role)]
    return reverse(ROLE_LANDING[roles[0]]) if len(roles) == 1 else None


def role_required(role: Role) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Anonymous users go to the login page; signed-in users without the role get 403."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This page is for the {role.value} role.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def any_role_required(*roles: Role) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Like ``role_required``, for a page several roles read (the labelers' guidelines: labelers and
    researchers)."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not any(has_role(request.user, role) for role in roles):
                names = " or ".join(role.value for role in roles)
                raise PermissionDenied(f"This page is for the {names} role.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


class ResearchTeamQuerySet(QuerySet):
    """For what belongs to the research team as a whole (the question bank, corpora, answers, batches,
    exports): researchers see all of it, other roles none (they reach questions only through their work)."""

    def visible_to(self, user: AnyUser) -> ResearchTeamQuerySet:
        return self if has_role(user, Role.RESEARCHER) else self.none()


def get_visible_or_404(queryset: QuerySet[M], user: AnyUser, **lookup: Any) -> M:
    """The object if ``user`` may see it, else 404 (the same answer as for a missing object)."""
    return get_object_or_404(queryset.visible_to(user), **lookup)


def roles_context(request: HttpRequest) -> dict[str, Any]:
    """Template context: ``roles`` (names) for the navigation."""
    return {"roles": {role.value for role in user_roles(request.user)}}
