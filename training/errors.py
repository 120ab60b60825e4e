"""The refusal every kind of training-side job request raises (training, sampling and proxy-evaluation runs,
rounds): one exception whose ``field`` names the input, so pages, the API and the commands report it alike."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


class RunError(ValueError):
    """A run that cannot start. ``field`` names the input the reason is about: ``export``, ``preset``,
    ``base_checkpoint``, ``settings``, one setting (``max_length``) or "" for the run as a whole."""

    def __init__(self, reason: str, field: str = "") -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.reason, self.field = reason, field


def bounded_settings(
    given: Any,
    defaults: Mapping[str, Any],
    bounds: Mapping[str, tuple[float, float]],
    whole: Collection[str],
) -> dict[str, Any]:
    """A request's settings (an object of names and values; None keeps a default) with ``defaults`` filled in
    and each bounded one checked: a number (not a bool) within its bounds, an int where ``whole`` names it,
    else a float; RunError naming the setting at fault (``settings`` for the object or an unknown name). The
    range is checked before wholeness, so NaN and the infinities are refused before ``int()`` meets them."""
    if not isinstance(given, dict):
        raise RunError("expected an object of setting names and values", "settings")
    unknown = sorted(str(name) for name in given if name not in defaults)
    if unknown:
        raise RunError(f"unknown setting(s): {', '.join(unknown)}"[:300], "settings")
    values = dict(defaults) | {name: value for name, value in given.items() if value is not None}
    for name, (low, high) in bounds.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RunError(f"expected a number, got {type(value).__name__}", name)
        if not low <= value <= high:
            raise RunError(f"must be between {_number(low)} and {_number(high)}", name)
        if name in whole and value != int(value):
            raise RunError("expected a whole number", name)
        values[name] = int(value) if name in whole else float(value)
    return values


def _number(bound: float) -> str:
    return str(int(bound)) if bound == int(bound) else f"{bound:g}"
