"""Typed readers for environment variables.

Every reader raises ``ImproperlyConfigured`` naming the variable and the accepted values, so a bad
deployment stops at start-up with one clear line instead of misbehaving later. Secrets may also be
given as ``NAME_FILE`` (a path whose content is the value), as Docker and systemd credentials do.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    """The raw value of ``name`` (or the content of the file named by ``name_FILE``), else ``default``."""
    file_var = f"{name}_FILE"
    if os.environ.get(file_var):
        path = Path(os.environ[file_var])
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{file_var}: cannot read {path}: {exc.strerror}") from exc
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_ratios(name: str, default: dict[str, float], *, keys: tuple[str, ...]) -> dict[str, float]:
    """Ratios like ``bc=0.4,rm=0.3,rl=0.2,eval=0.1``: every key present, non-negative, summing to 1."""
    raw = os.environ.get(name)
    if raw is None:
        return dict(default)
    ratios: dict[str, float] = {}
    for item in raw.split(","):
        key, sep, number = item.partition("=")
        key = key.strip()
        if not sep or key not in keys:
            raise ImproperlyConfigured(
                f"{name}: expected items like {keys[0]}=0.4 with keys {', '.join(keys)}, got {item.strip()!r}"
            )
        try:
            ratios[key] = float(number)
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {key} must be a number, got {number.strip()!r}") from None
        if ratios[key] < 0:
            raise ImproperlyConfigured(f"{name}: {key} must not be negative")
    missing = [k for k in keys if k not in ratios]
    if missing:
        raise ImproperlyConfigured(f"{name}: missing {', '.join(missing)}")
    if abs(sum(ratios.values()) - 1.0) > 1e-6:
        raise ImproperlyConfigured(f"{name}: ratios must sum to 1, got {sum(ratios.values()):g}")
    return ratios


_RATE_PERIODS = {"second": "s", "minute": "m", "hour": "h", "day": "d"}


def env_rate(name: str, default: str) -> str:
    """A request rate like ``120/minute`` (per second, minute, hour or day), as DRF's throttles read it."""
    raw = (os.environ.get(name) or default).strip()
    count, sep, period = raw.partition("/")
    if not (sep and count.isascii() and count.isdigit() and int(count) > 0 and period in _RATE_PERIODS):
        raise ImproperlyConfigured(
            f"{name}: expected a rate like 120/minute (a positive count per second, minute, hour or day), "
            f"got {raw!r}"
        )
    return f"{int(count)}/{_RATE_PERIODS[period]}"
