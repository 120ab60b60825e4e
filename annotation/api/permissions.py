"""Role checks for API views. Object visibility stays with each model's ``visible_to(user)``: views build
their querysets from it, so an object a user may not see is a 404, exactly like the pages."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from core.permissions import Role, has_role


class _HasRole(BasePermission):
    roles: tuple[Role, ...] = ()
    message = "This endpoint is not for your role."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and any(has_role(user, role) for role in self.roles))


class IsResearcher(_HasRole):
    roles = (Role.RESEARCHER,)


class IsLabeler(_HasRole):
    roles = (Role.LABELER,)


class IsDemonstratorOrResearcher(_HasRole):
    roles = (Role.DEMONSTRATOR, Role.RESEARCHER)


class IsWorkerOrResearcher(_HasRole):
    """Time sheets: researchers read everyone's, labelers and demonstrators their own (the view narrows)."""

    roles = (Role.RESEARCHER, Role.LABELER, Role.DEMONSTRATOR)


class IsLabelerOrResearcher(_HasRole):
    """A task's own endpoints: a labeler's tasks, and a researcher's reference tasks (their own only)."""

    roles = (Role.LABELER, Role.RESEARCHER)


class IsLabelerOrDemonstrator(_HasRole):
    roles = (Role.LABELER, Role.DEMONSTRATOR)
