"""The one error the fetcher raises, and an in-process count of refusals per reason."""

from __future__ import annotations

import threading
from collections import Counter

# Every reason code the fetcher uses (docs/fetching.md explains each one).
REASONS = (
    "bad_url",
    "scheme_not_allowed",
    "credentials_in_url",
    "name_not_resolved",
    "address_not_allowed",
    "connection_failed",
    "timeout",
    "bad_response",
    "too_many_redirects",
    "bad_redirect",
    "too_large",
    "content_type_not_allowed",
    "encoding_not_allowed",
    "robots_disallowed",
    "rate_limited",
)


class FetchRefused(Exception):
    """A fetch that did not happen or did not finish; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, message: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown refusal reason {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.message = message


_lock = threading.Lock()
_counts: Counter[str] = Counter()


def record_refusal(reason: str) -> None:
    with _lock:
        _counts[reason] += 1


def refusal_counts() -> dict[str, int]:
    """Refusals since the process started, per reason (for a metrics endpoint)."""
    with _lock:
        return dict(_counts)
