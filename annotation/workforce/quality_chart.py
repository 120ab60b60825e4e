"""The "My quality" page's chart of one kind of work: gold accuracy and agreement with the other labelers
per ISO week, each week's figure with its 95% interval, on the whole 0 to 1 axis (``core.plot``). The
page's table keeps the numbers; the chart shows the trend."""

from __future__ import annotations

import math

from django.utils.safestring import SafeString

from annotation.workforce.quality import KindQuality, Week
from core.charts import UNIT
from core.plot import DASHED, Series, interval_chart

MAX_TICKS = 10  # week labels under the axis; more weeks are labelled every second, third... week


def week_chart(kind: KindQuality) -> SafeString:
    """The chart, or an empty string when the kind has no weekly figure. Weeks are placed by their dates
    (a week without work leaves a gap), labelled by the Monday they start on."""
    weeks = [week for week, _, _ in kind.weeks]
    if not weeks:
        return SafeString()
    first = weeks[0].starts

    def at(week: Week) -> float:
        return (week.starts - first).days / 7

    series, intervals = [], []
    for label, rows, colour, dash in (
        ("gold accuracy", kind.gold_weeks, 0, ""),
        ("agreement with other labelers", kind.agreement_weeks, 1, DASHED),
    ):
        shown = [week for week in rows if week.figure.accuracy is not None]
        series.append(Series(label, [(at(week), week.figure.accuracy) for week in shown], colour, dash))
        intervals.append([(at(week), week.figure.low, week.figure.high) for week in shown])
    step = math.ceil(len(weeks) / MAX_TICKS)
    ends = {at(week) for s in (kind.gold_weeks, kind.agreement_weeks) if s for week in (s[0], s[-1])}
    ticks = [
        (at(week), f"{week.starts.day} {week.starts:%b}")
        for i, week in enumerate(weeks)
        if i % step == 0 or at(week) in ends
    ]
    title = f"{kind.label}: your gold accuracy and agreement per week"
    return interval_chart(
        series, intervals, title, "share (95% interval)", "week starting", ticks, y_bounds=UNIT
    )
