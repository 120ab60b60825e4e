"""The one estimate of a job's time left (core/progress.py): from the rate so far, none before there
is one, in words a page shows (issue 24: long jobs show how long they have left)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.progress import estimated_end, seconds_left, time_left_text


def test_the_time_left_is_what_is_left_at_the_rate_so_far():
    assert seconds_left(made=10, left=30, elapsed_s=20) == 60  # 10 units in 20 s: 30 more take 60 s
    assert seconds_left(made=0, left=30, elapsed_s=20) is None  # nothing done yet: no rate
    assert seconds_left(made=10, left=30, elapsed_s=1) is None  # the first seconds are start-up noise
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert estimated_end(10, 30, 20, now) == now + timedelta(seconds=60)
    assert estimated_end(10, -3, 20, now) == now  # a total that shrank below what is done: ending now


def test_the_time_left_reads_in_whole_minutes_rounded_up():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    texts = [time_left_text(now + timedelta(seconds=s), now) for s in (-5, 30, 61, 3599, 3661)]
    assert texts == [
        "taking longer than estimated",
        "less than a minute left",
        "about 2 min left",
        "about 1 h 00 min left",
        "about 1 h 02 min left",
    ]
    assert time_left_text(None, now) == ""
