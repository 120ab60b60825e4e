"""Time sheets: each person's active time per day (the union of their active spans, cut at local midnight),
the work done (on the local day it was started), researchers' corrections (validated, audited, never
deleted), the console page and its CSV, the API (researchers see everyone, labelers and demonstrators
themselves) and the command.

The site runs in Europe/Berlin here (UTC+1 in March), so a task started at 00:15 on a Tuesday in Berlin,
which is still Monday in UTC, must count on Tuesday. The clock stands at Wednesday 11 March 2026, noon.
How heartbeats become spans is tests/test_active_time.py."""

from __future__ import annotations

import csv
import importlib
import io
import json
import zoneinfo
from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    ActiveKind,
    ActiveSpan,
    Answer,
    Assignment,
    AssignmentStatus,
    Episode,
    EpisodeKind,
    EpisodeStatus,
    FeedbackBatch,
    FeedbackItem,
    Question,
    TimeCorrection,
)
from annotation.workforce.corrections import CorrectionError, correct
from annotation.workforce.periods import PeriodError, period_from
from annotation.workforce.sheets import hours_minutes
from annotation.workforce.timesheets import days, seconds_by_user
from core.models import AuditEntry
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
MONDAY = date(2026, 3, 9)
TUESDAY, WEDNESDAY = MONDAY + timedelta(days=1), MONDAY + timedelta(days=2)


def local(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=BERLIN)


@pytest.fixture(autouse=True)
def berlin_wednesday(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    with time_machine.travel(local(WEDNESDAY, 12), tick=False):
        yield


@pytest.fixture
def erin(django_user_model):
    return make_user(django_user_model, "=erin", "labeler", "demonstrator")


_items = iter(range(1, 10_000))


def worked(person, kind: ActiveKind, started: datetime, seconds: float) -> None:
    """``seconds`` of active time from ``started``, as heartbeats record it (real seconds: in UTC, as adding
    to a Berlin time would move the clock, which skips an hour one night in March)."""
    started = started.astimezone(UTC)
    ActiveSpan.objects.create(
        user=person, kind=kind, started_at=started, ended_at=started + timedelta(seconds=seconds)
    )


def task(labeler, started: datetime, seconds: float, status=AssignmentStatus.SUBMITTED) -> Assignment:
    """A task on an item of its own, started at ``started`` (the model stamps the time of creation), worked
    on for ``seconds`` from then (a researcher's reference is no one's paid work: no active time)."""
    batch = FeedbackBatch.objects.get_or_create(name="sheet", defaults={"template": "webgpt_comparison"})[0]
    number = next(_items)
    question = Question.objects.create(text=f"Question {number}?", key=f"q{number}", dataset="demo")
    answer = Answer.objects.create(question=question, text="a", source_kind="model", source={"model": "m"})
    item = FeedbackItem.objects.create(batch=batch, question=question, sides={})
    item.answers.set([answer])
    assignment = Assignment.objects.create(
        item=item,
        labeler=labeler,
        order=[answer.pk],
        status=status,
        response={},
        leased_until=started + timedelta(hours=1),
        active_seconds=seconds,
        is_reference=status == AssignmentStatus.REFERENCE,
    )
    Assignment.objects.filter(pk=assignment.pk).update(started_at=started)
    if status != AssignmentStatus.REFERENCE:
        worked(labeler, ActiveKind.TASK, started, seconds)
    return assignment


def episode(user, started: datetime, seconds: float, status=EpisodeStatus.FINISHED) -> Episode:
    number = next(_items)
    question = Question.objects.create(text=f"Question {number}?", key=f"q{number}", dataset="demo")
    made = Episode.objects.create(
        kind=EpisodeKind.HUMAN if user else EpisodeKind.MODEL,
        user=user,
        policy="" if user else "policy",
        question=question,
        status=status,
        settings={},
        state={},
        active_seconds=seconds,
    )
    Episode.objects.filter(pk=made.pk).update(started_at=started)
    if user:
        worked(user, ActiveKind.DEMONSTRATION, started, seconds)
    return made


@pytest.fixture
def week(alice, bob, dana):
    """Bob's and dana's work in the week of Monday 9 March, and some that must not count in it."""
    task(bob, local(MONDAY, 23, 30), 600)
    task(bob, local(TUESDAY, 0, 15), 300, AssignmentStatus.LATE)  # Monday 23:15 in UTC
    task(bob, local(TUESDAY, 9), 120, AssignmentStatus.SKIPPED)
    task(bob, local(TUESDAY, 10), 60, AssignmentStatus.EXPIRED)  # time spent, nothing done
    task(bob, local(MONDAY - timedelta(days=1), 23, 40), 599)  # Sunday: the week before
    task(bob, local(MONDAY + timedelta(days=7), 0, 10), 777)  # next Monday (Sunday 23:10 in UTC)
    task(alice, local(MONDAY, 10), 450, AssignmentStatus.REFERENCE)  # a researcher's reference
    episode(dana, local(MONDAY, 14), 900)
    episode(dana, local(TUESDAY, 8), 200, EpisodeStatus.SKIPPED)
    episode(None, local(MONDAY, 14), 55)  # a model's sample
    return {"bob": bob, "dana": dana, "alice": alice}


def figures(day) -> tuple:
    return (
        day.user_id,
        day.day,
        day.task_seconds,
        day.demonstration_seconds,
        day.corrected_seconds,
        day.tasks,
        day.late,
        day.skipped,
        day.demonstrations,
        day.demonstrations_skipped,
    )


# Days and sums ------------------------------------------------------------------------------------------


def test_days_by_hand_on_the_local_day_each_piece_of_work_was_started(week):
    bob, dana = week["bob"], week["dana"]
    assert [figures(day) for day in days(MONDAY, MONDAY + timedelta(days=6))] == [
        (bob.pk, MONDAY, 600.0, 0.0, 0.0, 1, 0, 0, 0, 0),
        (bob.pk, TUESDAY, 300.0 + 120 + 60, 0.0, 0.0, 0, 1, 1, 0, 0),
        (dana.pk, MONDAY, 0.0, 900.0, 0.0, 0, 0, 0, 1, 0),
        (dana.pk, TUESDAY, 0.0, 200.0, 0.0, 0, 0, 0, 0, 1),
    ]


def test_in_utc_the_same_work_falls_on_other_days(week, settings):
    settings.TIME_ZONE = "UTC"  # the 00:15 task is Monday's there, and next Monday's 00:10 is Sunday's
    bob = week["bob"]
    by_day = {day.day: day.task_seconds for day in days(MONDAY, MONDAY + timedelta(days=6), [bob.pk])}
    assert by_day == {MONDAY: 600.0 + 300, TUESDAY: 180.0, MONDAY + timedelta(days=6): 777.0}


def test_when_nothing_overlaps_a_time_sheet_adds_up_to_the_active_time_stored(week):
    bob, dana = week["bob"], week["dana"]
    many = [local(MONDAY, 9) + timedelta(hours=7 * n, minutes=n) for n in range(40)]  # across midnights
    for n, started in enumerate(many):
        task(bob, started, 10.1 * n + 0.3)
        episode(dana, started, 7.7 * n + 0.1, EpisodeStatus.SKIPPED)
    start, end = MONDAY - timedelta(days=14), MONDAY + timedelta(days=21)
    # To the microsecond, as the spans keep time.
    stored_tasks = Assignment.objects.exclude(status=AssignmentStatus.REFERENCE).aggregate(
        s=Sum("active_seconds")
    )
    stored_demos = Episode.objects.filter(kind=EpisodeKind.HUMAN).aggregate(s=Sum("active_seconds"))
    found = days(start, end)
    assert sum(day.task_seconds for day in found) == pytest.approx(stored_tasks["s"], abs=1e-3)
    assert sum(day.demonstration_seconds for day in found) == pytest.approx(stored_demos["s"], abs=1e-3)
    totals = seconds_by_user(start, end)
    for person in (bob, dana):
        stored = Assignment.objects.filter(labeler=person).exclude(status=AssignmentStatus.REFERENCE)
        stored_seconds = (stored.aggregate(s=Sum("active_seconds"))["s"] or 0) + (
            Episode.objects.filter(user=person).aggregate(s=Sum("active_seconds"))["s"] or 0
        )
        assert stored_seconds > 0
        assert totals[person.pk] == pytest.approx(stored_seconds, abs=1e-3)
    # Split into weeks, the weeks add up to the whole.
    weekly = [
        seconds_by_user(start + timedelta(days=7 * w), start + timedelta(days=7 * w + 6)) for w in range(5)
    ]
    assert sum(week.get(bob.pk, 0) for week in weekly) == pytest.approx(totals[bob.pk], abs=1e-3)


def test_time_across_midnight_is_cut_there_in_the_site_time_zone(week):
    bob = week["bob"]
    worked(bob, ActiveKind.TASK, local(TUESDAY, 23, 50), 30 * 60)
    by_day = {day.day: day.task_seconds for day in days(TUESDAY, WEDNESDAY, [bob.pk])}
    assert by_day == {TUESDAY: 480.0 + 600, WEDNESDAY: 1200.0}


def test_the_night_the_clocks_go_forward_has_an_hour_less(bob):
    saturday = date(2026, 3, 28)  # Berlin goes from 02:00 to 03:00 on Sunday 29 March
    worked(bob, ActiveKind.TASK, local(saturday, 23), 4 * 3600)  # until 04:00 on Sunday's clock
    by_day = {day.day: day.task_seconds for day in days(saturday, saturday + timedelta(days=1))}
    assert by_day == {saturday: 3600.0, saturday + timedelta(days=1): 3 * 3600.0}


def test_a_person_on_two_pages_at_once_is_at_work_once(erin):
    """Erin labels in two tabs and browses an episode at the same time: each minute counts once, as
    demonstration time while she was on both (so the columns add up to the day)."""
    worked(erin, ActiveKind.TASK, local(TUESDAY, 10), 75)  # one tab ...
    worked(erin, ActiveKind.TASK, local(TUESDAY, 10, 1), 60)  # ... and another, 15 s together
    worked(erin, ActiveKind.DEMONSTRATION, local(TUESDAY, 10), 75)  # the episode, beside the first tab
    (tuesday,) = days(TUESDAY, TUESDAY, [erin.pk])
    assert (tuesday.task_seconds, tuesday.demonstration_seconds) == (45.0, 75.0)
    assert tuesday.total_seconds == 120.0  # 10:00:00 to 10:02:00


def test_days_before_the_change_keep_the_time_their_sheets_showed(erin, settings):
    """The migration to spans turns each person's recorded time per day and kind into spans from the day's
    midnight, so an old sheet reads as it did; a day that counted more than 24 hours (two pages at once)
    keeps 24."""
    tasks = [task(erin, local(MONDAY, 23, 30), 600), task(erin, local(TUESDAY, 9), 50_000)]
    episode(erin, local(TUESDAY, 10), 50_000)
    episode(erin, local(MONDAY, 8), 1.5, EpisodeStatus.SKIPPED)
    task(erin, local(MONDAY, 11), 300, AssignmentStatus.REFERENCE)  # no one's paid work
    ActiveSpan.objects.all().delete()  # as before the change: only the per-task seconds
    migration = importlib.import_module("annotation.migrations.0023_active_spans")
    migration.spans_from_recorded_time(apps, None)
    assert [figures(day)[1:5] for day in days(MONDAY, TUESDAY)] == [
        (MONDAY, 600.0, 1.5, 0.0),
        (TUESDAY, 50_000.0, 24 * 3600.0 - 50_000, 0.0),
    ]
    assert Assignment.objects.get(pk=tasks[1].pk).active_seconds == 50_000  # the task's own time is kept


def test_hours_minutes():
    assert [hours_minutes(s) for s in (0, 29, 30, 59 * 60 + 29, 3600 * 7 + 5 * 60, -1800, 100 * 3600)] == [
        "0:00",
        "0:00",
        "0:01",
        "0:59",
        "7:05",
        "-0:30",
        "100:00",
    ]


# Periods -------------------------------------------------------------------------------------------------


def test_periods_from_a_query():
    today = WEDNESDAY
    assert (period_from({}, today).start, period_from({}, today).end) == (MONDAY, MONDAY + timedelta(days=6))
    week = period_from({"week": "2026-11-30"}, today)
    assert (week.start, week.end, week.is_week) == (date(2026, 11, 30), date(2026, 12, 6), True)
    assert period_from({"week": "2026-12-03"}, today).start == date(2026, 11, 30)  # any day of the week
    assert (week.previous.start, week.next.start) == (date(2026, 11, 23), date(2026, 12, 7))
    span = period_from({"start": "2026-01-01", "end": "2026-04-02"}, today)  # 92 days
    assert (span.start, span.end, span.is_week) == (date(2026, 1, 1), date(2026, 4, 2), False)
    assert span.query == "start=2026-01-01&end=2026-04-02"


@pytest.mark.parametrize(
    "query, field",
    [
        ({"week": "2026-13-01"}, "week"),
        ({"week": "30-11-2026"}, "week"),
        ({"week": "20261130"}, "week"),
        ({"week": "2026-W48-1"}, "week"),
        ({"week": "0001-01-01"}, "week"),
        ({"week": "2026-11-30\x00"}, "week"),
        ({"week": "2026-11-30", "start": "2026-11-30"}, "week"),
        ({"start": "2026-11-30"}, "end"),
        ({"end": "2026-11-30"}, "start"),
        ({"start": "2026-11-30", "end": "2026-11-29"}, "end"),
        ({"start": "2026-01-01", "end": "2026-04-03"}, "end"),  # 93 days
    ],
)
def test_bad_periods_name_their_field(query, field):
    with pytest.raises(PeriodError) as raised:
        period_from(query, WEDNESDAY)
    assert raised.value.field == field


# Corrections ------------------------------------------------------------------------------------------


def test_a_correction_is_added_to_the_day_and_audited(week, alice):
    bob = week["bob"]
    made = correct(alice, "bob", WEDNESDAY, 30, "  Labelled on paper during the outage  ")
    assert (made.user, made.day, made.seconds, made.reason, made.by) == (
        bob,
        WEDNESDAY,
        1800.0,
        "Labelled on paper during the outage",
        alice,
    )
    entry = AuditEntry.objects.get(action="timesheet.correct")
    assert (entry.actor, entry.object_id, entry.data["seconds"], entry.data["day"]) == (
        alice,
        str(made.pk),
        1800.0,
        "2026-03-11",
    )
    assert entry.data["reason"] == "Labelled on paper during the outage"
    correct(alice, "bob", MONDAY, -5, "A break counted as work")
    (monday, _, wednesday) = days(MONDAY, WEDNESDAY, [bob.pk])
    assert (monday.corrected_seconds, monday.total_seconds) == (-300.0, 300.0)
    assert [row.reason for row in monday.corrections] == ["A break counted as work"]
    assert (wednesday.recorded_seconds, wednesday.total_seconds) == (0.0, 1800.0)
    assert seconds_by_user(MONDAY, WEDNESDAY)[bob.pk] == 300 + 480 + 1800


def test_a_mistaken_correction_is_undone_by_another(week, alice):
    correct(alice, "dana", MONDAY, 60, "typo: meant 6")
    correct(alice, "dana", MONDAY, -60, "undoing the typo")
    correct(alice, "dana", MONDAY, 6, "the intended one")
    (monday,) = days(MONDAY, MONDAY, [week["dana"].pk])
    assert (monday.corrected_seconds, monday.total_seconds, len(monday.corrections)) == (360.0, 1260.0, 3)
    assert TimeCorrection.objects.count() == 3  # none deleted


@pytest.mark.parametrize(
    "user, day, minutes, reason, field",
    [
        ("bob", WEDNESDAY, 30, "   ", "reason"),
        ("bob", WEDNESDAY, 30, "x" * 1001, "reason"),
        ("bob", WEDNESDAY + timedelta(days=1), 30, "tomorrow", "day"),
        ("bob", date(1999, 12, 31), 30, "long ago", "day"),
        ("bob", WEDNESDAY, 0, "nothing", "minutes"),
        ("bob", WEDNESDAY, 24 * 60 + 1, "too much", "minutes"),
        ("bob", WEDNESDAY, -(24 * 60 + 1), "too little", "minutes"),
        ("bob", MONDAY, -11, "more than he worked", "minutes"),  # he has 10 minutes on Monday
        ("nobody", WEDNESDAY, 30, "who?", "user"),
        ("alice", WEDNESDAY, 30, "a researcher", "user"),
        ("charlie", WEDNESDAY, 30, "no role", "user"),
        ("bob\x00", WEDNESDAY, 30, "NUL", "user"),
    ],
)
def test_refused_corrections_write_nothing(week, alice, charlie, user, day, minutes, reason, field):
    with pytest.raises(CorrectionError) as raised:
        correct(alice, user, day, minutes, reason)
    assert raised.value.field == field
    assert not TimeCorrection.objects.exists()
    assert not AuditEntry.objects.filter(action="timesheet.correct").exists()


def test_taking_away_exactly_what_was_worked_is_allowed_and_no_more_after(week, alice):
    correct(alice, "bob", MONDAY, -10, "not work")
    with pytest.raises(CorrectionError, match="less than nothing"):
        correct(alice, "bob", MONDAY, -1, "still not work")
    assert days(MONDAY, MONDAY, [week["bob"].pk])[0].total_seconds == 0.0


def test_a_day_never_holds_more_than_24_hours_corrections_included(week, alice):
    """Two +1440-minute corrections on one day were both accepted: a 48-hour day."""
    bob = week["bob"]
    correct(alice, "dana", WEDNESDAY, 24 * 60, "A whole day on paper")
    with pytest.raises(CorrectionError, match="longer than 24 hours") as raised:
        correct(alice, "dana", WEDNESDAY, 24 * 60, "And another")
    assert raised.value.field == "minutes"
    with pytest.raises(CorrectionError) as raised:  # he worked 10 minutes on Monday
        correct(alice, "bob", MONDAY, 24 * 60, "The whole day")
    assert raised.value.message == (
        "bob has 10 min on 2026-03-09; adding 24 h would make the day longer than 24 hours."
    )
    correct(alice, "bob", MONDAY, 24 * 60 - 10, "The rest of the day")
    assert days(MONDAY, MONDAY, [bob.pk])[0].total_seconds == 24 * 3600
    # Time recorded after the correction does not take the day over either.
    worked(bob, ActiveKind.TASK, local(MONDAY, 12), 600)
    (monday,) = days(MONDAY, MONDAY, [bob.pk])
    assert (monday.recorded_seconds, monday.total_seconds) == (1200.0, 24 * 3600)


def test_the_page_and_the_api_both_refuse_a_day_over_24_hours(week, client_for, alice):
    client = client_for(alice)
    body = {"user": "dana", "day": "2026-03-10", "minutes": 24 * 60, "reason": "Paper work"}
    page = client.post(reverse("console:timesheet_correct"), body)
    assert page.status_code == 400
    assert "dana has 3 min on 2026-03-10; adding 24 h would make the day longer than 24 hours." in (
        page.content.decode()
    )
    api = client.post(reverse("api-timesheet-corrections"), json.dumps(body), content_type="application/json")
    assert api.status_code == 400
    assert "longer than 24 hours" in api.json()["minutes"][0]
    assert not TimeCorrection.objects.exists()


# The console page and its CSV ---------------------------------------------------------------------------


def test_the_page_shows_the_week_by_hand(week, client_for, alice):
    correct(alice, "bob", TUESDAY, 45, "Training session")
    response = client_for(alice).get(reverse("console:timesheets"))
    assert response.status_code == 200
    text = response.content.decode()
    assert "Week of Mon 09 Mar 2026 to Sun 15 Mar 2026" in text
    people = {person["username"]: person for person in response.context["people"]}
    assert list(people) == ["bob", "dana"]
    bob = people["bob"]
    assert [(row["day"], row["total"], row["tasks"], row["late"], row["skipped"]) for row in bob["days"]] == [
        (MONDAY, "0:10", 1, 0, 0),
        (TUESDAY, "0:53", 0, 1, 1),  # 8 minutes recorded + 45 corrected
    ]
    assert bob["days"][1]["corrections"][0]["change"] == "+45 min"
    assert bob["days"][1]["corrections"][0]["reason"] == "Training session"
    assert (bob["totals"]["total"], bob["totals"]["task_time"], bob["totals"]["corrected"]) == (
        "1:03",
        "0:18",
        "0:45",
    )
    dana = people["dana"]["totals"]
    assert (dana["total"], dana["demonstrations"], dana["demonstrations_skipped"]) == ("0:18", 1, 1)
    assert "Training session" in text
    assert "week=2026-03-02" in text and "week=2026-03-16" in text  # the weeks around it


def test_the_page_for_another_week_and_a_range(week, client_for, alice):
    client = client_for(alice)
    before = client.get(reverse("console:timesheets"), {"week": "2026-03-05"})
    assert [row["day"] for p in before.context["people"] for row in p["days"]] == [MONDAY - timedelta(days=1)]
    span = client.get(reverse("console:timesheets"), {"start": "2026-03-08", "end": "2026-03-09"})
    assert [(p["username"], len(p["days"])) for p in span.context["people"]] == [("bob", 2), ("dana", 1)]


@pytest.mark.parametrize(
    "query", [{"week": "next tuesday"}, {"week": "2026-02-30"}, {"start": "2026-03-01"}, {"week": "9" * 30}]
)
def test_a_bad_week_is_a_clear_error(week, client_for, alice, query):
    response = client_for(alice).get(reverse("console:timesheets"), query)
    assert response.status_code == 400
    assert "YYYY-MM-DD" in response.content.decode() or "'end' is missing" in response.content.decode()
    assert response.context["people"] == []


def test_the_csv_one_line_per_person_per_day_with_formulas_defused(week, client_for, alice, erin):
    task(erin, local(WEDNESDAY, 9), 95.25)
    correct(alice, "=erin", WEDNESDAY, 2, '=HYPERLINK("http://evil")')
    response = client_for(alice).get(reverse("console:timesheets_csv"), {"week": "2026-03-09"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="timesheet-2026-03-09-2026-03-15.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "user",
        "day",
        "task_seconds",
        "demonstration_seconds",
        "corrected_seconds",
        "total_seconds",
        "tasks",
        "late",
        "skipped",
        "demonstrations",
        "demonstrations_skipped",
        "corrections",
    ]
    assert rows[1:] == [
        [
            "'=erin",
            "2026-03-11",
            "95.2",
            "0.0",
            "120.0",
            "215.2",
            "1",
            "0",
            "0",
            "0",
            "0",
            '\'+2 min: =HYPERLINK("http://evil")',
        ],
        ["bob", "2026-03-09", "600.0", "0.0", "0.0", "600.0", "1", "0", "0", "0", "0", ""],
        ["bob", "2026-03-10", "480.0", "0.0", "0.0", "480.0", "0", "1", "1", "0", "0", ""],
        ["dana", "2026-03-09", "0.0", "900.0", "0.0", "900.0", "0", "0", "0", "1", "0", ""],
        ["dana", "2026-03-10", "0.0", "200.0", "0.0", "200.0", "0", "0", "0", "0", "1", ""],
    ]


def test_a_bad_csv_query_is_a_400(client_for, alice):
    response = client_for(alice).get(reverse("console:timesheets_csv"), {"week": "=1+1"})
    assert response.status_code == 400
    assert "'week' must be a day written YYYY-MM-DD" in response.content.decode()


def test_the_correction_form_takes_time_and_refuses_what_is_wrong(week, client_for, alice):
    client = client_for(alice)
    page = client.get(reverse("console:timesheets"))
    assert [name for name, _ in page.context["form"].fields["user"].choices] == ["", "bob", "dana"]
    url = reverse("console:timesheet_correct")
    response = client.post(url, {"user": "dana", "day": "2026-03-10", "minutes": "-3", "reason": "A break"})
    assert response.status_code == 302
    assert response.url == reverse("console:timesheets") + "?week=2026-03-09"
    correction = TimeCorrection.objects.get()
    assert (correction.user, correction.day, correction.seconds, correction.by) == (
        week["dana"],
        TUESDAY,
        -180.0,
        alice,
    )
    for body, words in (
        ({"user": "dana", "day": "2026-03-02", "minutes": "-5", "reason": "x"}, "less than nothing"),
        ({"user": "dana", "day": "2026-03-12", "minutes": "5", "reason": "x"}, "in the future"),
        ({"user": "dana", "day": "2026-03-10", "minutes": "5", "reason": " "}, "This field is required"),
        (
            {"user": "dana", "day": "2026-03-10", "minutes": "1441", "reason": "x"},
            "less than or equal to 1440",
        ),
        ({"user": "alice", "day": "2026-03-10", "minutes": "5", "reason": "x"}, "Select a valid choice"),
        ({"user": "dana", "day": "0001-01-01", "minutes": "5", "reason": "x"}, "before 2000-01-01"),
    ):
        refused = client.post(url, body)
        assert refused.status_code == 400, body
        assert words in refused.content.decode(), body
    assert TimeCorrection.objects.count() == 1


# The API -------------------------------------------------------------------------------------------------


def test_the_api_gives_researchers_everyone(week, client_for, alice):
    correct(alice, "bob", MONDAY, 1, "Briefing")
    response = client_for(alice).get(reverse("api-timesheets"), {"start": "2026-03-09", "end": "2026-03-10"})
    assert response.status_code == 200
    data = response.json()
    assert (data["start"], data["end"]) == ("2026-03-09", "2026-03-10")
    assert [(row["user"], row["day"], row["total_seconds"]) for row in data["days"]] == [
        ("bob", "2026-03-09", 660.0),
        ("bob", "2026-03-10", 480.0),
        ("dana", "2026-03-09", 900.0),
        ("dana", "2026-03-10", 200.0),
    ]
    first = data["days"][0]
    assert (first["tasks"], first["corrected_seconds"], first["corrections"][0]["reason"]) == (
        1,
        60.0,
        "Briefing",
    )
    assert first["corrections"][0]["by"] == "alice"
    assert data["totals"][0] == {
        "user": "bob",
        "task_seconds": 1080.0,
        "demonstration_seconds": 0.0,
        "corrected_seconds": 60.0,
        "total_seconds": 1140.0,
        "tasks": 1,
        "late": 1,
        "skipped": 1,
        "demonstrations": 0,
        "demonstrations_skipped": 0,
        "days": 2,
    }
    only = client_for(alice).get(reverse("api-timesheets"), {"user": "dana"}).json()  # this week
    assert {row["user"] for row in only["days"]} == {"dana"}


def test_labelers_and_demonstrators_see_only_their_own(week, client_for, charlie, erin):
    for person in ("bob", "dana"):
        client = client_for(week[person])
        data = client.get(reverse("api-timesheets")).json()
        assert {row["user"] for row in data["days"]} == {person}
        assert [row["user"] for row in data["totals"]] == [person]
        assert client.get(reverse("api-timesheets"), {"user": person}).status_code == 200
        other = "dana" if person == "bob" else "bob"
        assert client.get(reverse("api-timesheets"), {"user": other}).status_code == 403
    assert client_for(erin).get(reverse("api-timesheets")).json()["days"] == []
    assert client_for(charlie).get(reverse("api-timesheets")).status_code == 403
    assert client_for(None).get(reverse("api-timesheets")).status_code == 401


@pytest.mark.parametrize(
    "query, field",
    [
        ({"start": "2026-03-09"}, "end"),
        ({"start": "2026-03-09", "end": "2026-06-30"}, "end"),
        ({"week": "soon"}, "week"),
        ({"user": "nobody"}, "user"),
        ({"user": "x\x00"}, "user"),
    ],
)
def test_bad_api_queries_name_the_field(week, client_for, alice, query, field):
    response = client_for(alice).get(reverse("api-timesheets"), query)
    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_corrections_over_the_api(week, client_for, alice, bob):
    url = reverse("api-timesheet-corrections")
    client = client_for(alice)
    body = {"user": "bob", "day": "2026-03-10", "minutes": 20, "reason": "Meeting"}
    response = client.post(url, json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["correction"]["seconds"], data["correction"]["reason"], data["correction"]["by"]) == (
        1200.0,
        "Meeting",
        "alice",
    )
    assert (data["day"]["total_seconds"], data["day"]["corrected_seconds"]) == (1680.0, 1200.0)
    assert AuditEntry.objects.filter(action="timesheet.correct", actor=alice).count() == 1
    for changed, field in (
        ({"reason": ""}, "reason"),
        ({"day": "2026-03-12"}, "day"),
        ({"day": "yesterday"}, "day"),
        ({"minutes": 0}, "minutes"),
        ({"minutes": -2000}, "minutes"),
        ({"minutes": -100}, "minutes"),  # 28 minutes that day
        ({"minutes": "ten"}, "minutes"),
        ({"user": "charlie"}, "user"),
        ({"hours": 1}, "hours"),
    ):
        refused = client.post(url, json.dumps(body | changed), content_type="application/json")
        assert refused.status_code == 400, changed
        assert field in refused.json(), (changed, refused.json())
    assert TimeCorrection.objects.count() == 1
    assert client_for(bob).post(url, json.dumps(body), content_type="application/json").status_code == 403
    assert TimeCorrection.objects.count() == 1


def test_the_schema_has_both_endpoints(client_for, alice):
    schema = client_for(alice).get(reverse("api-schema"), {"format": "json"}).json()
    assert {"week", "start", "end", "user"} <= {
        p["name"] for p in schema["paths"]["/api/timesheets"]["get"]["parameters"]
    }
    assert "post" in schema["paths"]["/api/timesheets/corrections"]


# The command ---------------------------------------------------------------------------------------------


def test_the_command_prints_and_writes_the_csv(week, alice, tmp_path):
    correct(alice, "bob", MONDAY, 5, "Setup")
    out = io.StringIO()
    call_command("timesheet", "--week", "2026-03-09", stdout=out)
    text = out.getvalue()
    assert "Week of Mon 09 Mar 2026 to Sun 15 Mar 2026" in text
    assert "corrections: +5 min: Setup" in text
    assert "  2026-03-09      0:15    0:10    0:00    0:05     1    0    0     0    0\n" in text
    assert "  total           0:23    0:18    0:00    0:05     1    1    1     0    0\n" in text
    path = tmp_path / "sheet.csv"
    call_command("timesheet", "--week", "2026-03-09", "--csv", str(path), stdout=io.StringIO())
    rows = list(csv.reader(path.open()))
    assert [row[:2] + row[5:6] for row in rows[1:]] == [
        ["bob", "2026-03-09", "900.0"],
        ["bob", "2026-03-10", "480.0"],
        ["dana", "2026-03-09", "900.0"],
        ["dana", "2026-03-10", "200.0"],
    ]
    with pytest.raises(CommandError, match="--week must be a day"):
        call_command("timesheet", "--week", "2026-3-9")
    with pytest.raises(CommandError, match="No one is called"):
        call_command("timesheet", "--user", "nobody")


def test_the_clock_is_wednesday_in_berlin():
    assert timezone.localdate() == WEDNESDAY
