"""The browsing panel's many small forms, as tags: an ``{% include %}`` per button cost more than the
rest of the panel's rendering on every action."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag(takes_context=True)
def episode_meta(context: dict[str, Any]) -> SafeString:
    """CSRF token, idempotency key and version: every form on the panel sends them."""
    return format_html(
        '<input type="hidden" name="csrfmiddlewaretoken" value="{}">'
        '<input type="hidden" name="key" value="{}"><input type="hidden" name="version" value="{}">',
        context["csrf_token"],
        context["key"],
        context["version"],
    )


@register.simple_tag(takes_context=True)
def command_button(
    context: dict[str, Any], command: str, label: str, button_id: str, secondary: bool = False
) -> SafeString:
    """A one-button form that sends a fixed command ("Top", "End: Answer"...)."""
    return format_html(
        '<form method="post" action="{url}" hx-post="{url}" class="inline">{meta}'
        '<input type="hidden" name="kind" value="command"><input type="hidden" name="text" value="{command}">'
        '<button type="submit" id="{button_id}"{css}>{label}</button></form>',
        url=context["act_url"],
        meta=episode_meta(context),
        command=command,
        button_id=button_id,
        css=format_html(' class="{}"', "secondary") if secondary else "",
        label=label,
    )


@register.simple_tag(takes_context=True)
def remove_quote_button(context: dict[str, Any], number: int, url: str, htmx: bool = True) -> SafeString:
    """A one-button form that takes quote ``number`` off the list (htmx on the browsing panel; a plain
    form on the answer step). The button's name says which quote: "Remove quote 2"."""
    return format_html(
        '<form method="post" action="{url}"{hx} class="inline remove-quote">{meta}'
        '<input type="hidden" name="number" value="{number}">'
        '<button type="submit" id="remove-quote-{number}" class="secondary">'
        'Remove<span class="visually-hidden"> quote {number}</span></button></form>',
        url=url,
        hx=format_html(' hx-post="{}"', url) if htmx else "",
        meta=episode_meta(context),
        number=number,
    )
