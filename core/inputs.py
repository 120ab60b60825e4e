"""Limits on what a request or an imported file may hold, checked before anything reaches a service or the
database, so that no input is ever a 500. Pure Python, no Django.

- ``loads``: ``json.loads`` that refuses nesting deeper than ``MAX_JSON_DEPTH``, numbers that are not finite
  (``NaN``, ``1e999``: PostgreSQL's jsonb cannot hold them) and integers longer than Python converts (4,300
  digits), always as ``JSONInputError`` (a ``ValueError``), never ``RecursionError``.
- ``has_nul`` / ``json_depth`` / ``path_of``: iterative walks (a deep value cannot exhaust the stack).
- ``parse_id``: an id from a query string or a form: ASCII digits only (``"²".isdigit()`` is true, yet
  ``int("²")`` fails) and at most ``MAX_ID``, the largest primary key PostgreSQL and SQLite both store.
- ``is_web_url``: whether a URL may be shown as a link (http and https only).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 4300  # Python's own limit on int(str) (sys.int_info.default_max_str_digits)
MAX_ID = 2**63 - 1
_ID = re.compile(r"[0-9]{1,19}")


class JSONInputError(ValueError):
    """The text is not JSON we accept; the message says why, for the person who sent it."""


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise JSONInputError(f"the number {text[:20]} is too large")
    return number


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONInputError(f"a number has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a number JSON allows")


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``text``, or ``JSONInputError`` saying what is wrong with it."""
    try:
        value = json.loads(text, parse_float=_finite, parse_int=_integer, parse_constant=_constant)
    except JSONInputError:
        raise
    except RecursionError:
        # The C decoder gives up at the interpreter's recursion limit, long before memory runs out.
        raise JSONInputError(f"nested more than {max_depth} levels deep") from None
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        raise JSONInputError(f"invalid JSON ({exc.msg} at {where})") from None
    except (ValueError, UnicodeDecodeError) as exc:  # bytes that are not UTF-8/16/32
        raise JSONInputError(f"invalid JSON ({exc})") from None
    if json_depth(value) > max_depth:
        raise JSONInputError(f"nested more than {max_depth} levels deep")
    return value


def _nodes(value: Any) -> Iterator[tuple[Any, int]]:
    """Every node of a JSON-like value (object keys included) with its depth: a list or an object counts one
    level more than its parent (``[1]`` is at depth 1); a scalar sits at its parent's depth."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            yield node, depth + 1
            for key, child in node.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(node, list | tuple):
            yield node, depth + 1
            stack.extend((child, depth + 1) for child in node)
        else:
            yield node, depth


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (0 for a scalar, 1 for ``[1]``)."""
    return max((depth for _, depth in _nodes(value)), default=0)


def has_nul(value: Any) -> bool:
    """Whether a JSON-like value holds U+0000, which PostgreSQL cannot store (in text or jsonb): such input is
    refused where the error can say where it is, instead of failing in the database."""
    return any(isinstance(node, str) and "\x00" in node for node, _ in _nodes(value))


def path_of(value: Any, predicate: Callable[[Any], bool]) -> tuple[str, ...] | None:
    """The path (keys and indexes, as text) of a node of ``value`` (an object key, a list, a number...)
    for which ``predicate`` holds, or None."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if predicate(node):
            return path
        if isinstance(node, dict):
            for key, child in node.items():
                stack.append(((*path, str(key)), key))
                stack.append(((*path, str(key)), child))
        elif isinstance(node, list | tuple):
            stack.extend(((*path, str(index)), child) for index, child in enumerate(node))
    return None


def nul_path(value: Any) -> tuple[str, ...] | None:
    """The path of a text in ``value`` that holds U+0000, or None."""
    return path_of(value, lambda node: isinstance(node, str) and "\x00" in node)


def parse_id(value: Any) -> int | None:
    """An id (a positive integer a primary key can hold) from text, or None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 1 <= value <= MAX_ID else None
    if not isinstance(value, str) or not _ID.fullmatch(value):
        return None
    number = int(value)
    return number if 1 <= number <= MAX_ID else None


def is_web_url(url: Any) -> bool:
    """An absolute http or https URL with a host: the only kind shown as a link (never ``javascript:``,
    ``data:``, relative paths...)."""
    if not isinstance(url, str) or url != url.strip() or any(ord(c) < 32 for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return False
    return parts.scheme.lower() in {"http", "https"} and bool(parts.hostname)
