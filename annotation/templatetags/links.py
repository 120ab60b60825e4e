"""Links to outside pages: only http and https URLs become links (``{{ url|web_url }}`` is "" otherwise)."""

from __future__ import annotations

from typing import Any

from django import template

from core.inputs import is_web_url

register = template.Library()


@register.filter
def web_url(url: Any) -> str:
    """The URL when it may be a link (absolute http/https), else "": a quote's ``javascript:`` or ``data:``
    URL is shown as text, never as a live link (imports refuse them; this covers stored and corpus URLs)."""
    return url if is_web_url(url) else ""
