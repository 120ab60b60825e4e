"""robots.txt, fetched through the same safe fetcher and remembered per origin for an hour.

RFC 9309: a missing robots.txt (4xx) allows everything; one that cannot be read (5xx, refused, timed
out) disallows everything until we try again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.robotparser import RobotFileParser

from browser.fetch.refusals import FetchRefused

TTL_SECONDS = 3600.0
MAX_ORIGINS = 10_000


class RobotsRules:
    """Parsed robots.txt per origin; ``load(origin)`` fetches ``origin/robots.txt`` -> (status, text)."""

    def __init__(self, load: Callable[[str], tuple[int, str]]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._rules: dict[str, tuple[float, RobotFileParser]] = {}

    def allowed(self, origin: str, url: str, user_agent: str) -> bool:
        return self._parser(origin).can_fetch(user_agent, url)

    def _parser(self, origin: str) -> RobotFileParser:
        now = time.monotonic()
        with self._lock:
            cached = self._rules.get(origin)
        if cached and now - cached[0] < TTL_SECONDS:
            return cached[1]
        parser = RobotFileParser()
        try:
            status, text = self._load(origin)
        except FetchRefused:
            status, text = 503, ""
        if 200 <= status < 300:
            parser.parse(text.splitlines())
        elif 400 <= status < 500:
            parser.allow_all = True
        else:
            parser.disallow_all = True
        with self._lock:
            if len(self._rules) >= MAX_ORIGINS:
                self._rules.clear()
            self._rules[origin] = (now, parser)
        return parser
