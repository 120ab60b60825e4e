"""Figures on pages: a share as a percentage, and an estimate with its count and 95% interval."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(value: float | None) -> str:
    """0.745 -> "75%"; "—" for no value."""
    return "—" if value is None else f"{value:.0%}"


@register.simple_tag
def estimate(value: float | None, count: int, low: float, high: float) -> str:
    """ "75% [61%-86%], n = 40": the one way a share with its interval is written on the workforce pages."""
    if value is None or not count:
        return "— (n = 0)"
    return f"{value:.0%} [{low:.0%}-{high:.0%}], n = {count}"


@register.filter
def share(figure: dict | None) -> str:
    """An estimate dict (``result_stats.estimate``) as "75% [61%-86%], 40 questions"; "—" without one."""
    if not figure or figure.get("value") is None:
        return "—"
    count = figure.get("questions", 0)
    words = f"{count} question" + ("" if count == 1 else "s")
    return f"{figure['value']:.0%} [{figure['low']:.0%}-{figure['high']:.0%}], {words}"
