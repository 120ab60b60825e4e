"""``{% page_view "task" assignment.pk assignment.labeler_id %}``: the signed page view a task or browsing
page carries to its owner, which its heartbeats send back so that they count as active time
(``workforce.activity``). Anyone else reading the page (a researcher) gets none: their heartbeats count
nothing."""

from __future__ import annotations

from typing import Any

from django import template

from annotation.models import ActiveKind
from annotation.workforce.activity import page_view as make_page_view

register = template.Library()


@register.simple_tag(takes_context=True)
def page_view(context: dict[str, Any], kind: str, pk: int, owner_id: int) -> str:
    user = context["request"].user
    return make_page_view(user, ActiveKind(kind), pk) if user.pk == owner_id else ""
