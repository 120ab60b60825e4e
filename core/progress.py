"""How long a job has left, from its progress so far: one estimate for every job page (training runs,
sampling runs, proxy evaluations, corpus imports) and one way to say it. Workers that know when their
real work began (after loading a model) store ``estimated_end``; a page can also estimate from the row."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils import timezone

MIN_ELAPSED_S = 5.0  # before this, a rate is mostly start-up noise: no estimate
# A job writes its progress (and reads its cancel flag) at most this often: the pages poll every second, so
# more writes would only load the database (a training step can take 0.1 s).
SAVE_EVERY_S = 1.0


class Every:
    """Says when ``seconds`` have passed since it last said so (at once the first time, unless
    ``due_now`` is False): the one throttle of every job's progress writes, cancel reads and log lines."""

    def __init__(
        self,
        seconds: float | None = None,
        *,
        due_now: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = SAVE_EVERY_S if seconds is None else seconds  # read now: tests set it to 0
        self.clock = clock
        self.last = float("-inf") if due_now else clock()

    def due(self, force: bool = False) -> bool:
        """Whether it is time (always when ``force``); the time counts again from now when it is."""
        now = self.clock()
        if not force and now - self.last < self.seconds:
            return False
        self.last = now
        return True


def seconds_left(made: float, left: float, elapsed_s: float) -> float | None:
    """The seconds ``left`` units of work take at the rate at which ``made`` units took ``elapsed_s``;
    None while there is no rate to go by."""
    if made <= 0 or elapsed_s < MIN_ELAPSED_S:
        return None
    return max(left, 0.0) * elapsed_s / made


def estimated_end(made: float, left: float, elapsed_s: float, now: datetime | None = None) -> datetime | None:
    """When the work ends at that rate (``seconds_left`` from ``now``); None without an estimate."""
    seconds = seconds_left(made, left, elapsed_s)
    return None if seconds is None else (now or timezone.now()) + timedelta(seconds=seconds)


def time_left_text(end: datetime | None, now: datetime | None = None) -> str:
    """The estimate in words for a page ("about 4 min left"); "" without one. Rounded up to whole
    minutes: an estimate from a rate is not worth seconds."""
    if end is None:
        return ""
    seconds = (end - (now or timezone.now())).total_seconds()
    if seconds < 0:
        return "taking longer than estimated"
    if seconds < 60:
        return "less than a minute left"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes:02d} min left"
