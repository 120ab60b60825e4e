"""Active time as spans of wall-clock time, which time sheets join per person (two pages open at once count
once). Days before this change keep what their time sheets showed: each person's recorded seconds per local
day and kind (the task's or episode's, on the day it was started) become one span from that day's midnight,
tasks first, then demonstrations; a day that had more than 24 hours (time counted twice) keeps 24."""

from collections import defaultdict
from datetime import UTC, datetime, time, timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

DAY_SECONDS = 24 * 3600.0


def spans_from_recorded_time(apps, schema_editor):
    Assignment = apps.get_model("annotation", "Assignment")
    Episode = apps.get_model("annotation", "Episode")
    ActiveSpan = apps.get_model("annotation", "ActiveSpan")
    zone = timezone.get_default_timezone()
    recorded = defaultdict(dict)  # (user, day) -> {kind: seconds}
    tasks = Assignment.objects.exclude(status="reference").filter(active_seconds__gt=0)
    episodes = Episode.objects.filter(kind="human", active_seconds__gt=0)
    for kind, rows, person in (("task", tasks, "labeler_id"), ("demonstration", episodes, "user_id")):
        by_day = rows.annotate(day=TruncDate("started_at", tzinfo=zone)).values(person, "day")
        for row in by_day.annotate(seconds=Sum("active_seconds")):
            recorded[row[person], row["day"]][kind] = row["seconds"]
    spans = []
    for (user_id, day), seconds in recorded.items():
        start = datetime.combine(day, time.min, tzinfo=zone).astimezone(UTC)
        left = DAY_SECONDS
        for kind in ("task", "demonstration"):
            length = timedelta(seconds=min(seconds.get(kind, 0.0), left))
            if length:
                spans.append(
                    ActiveSpan(user_id=user_id, kind=kind, started_at=start, ended_at=start + length)
                )
                start, left = start + length, left - length.total_seconds()
    ActiveSpan.objects.bulk_create(spans, batch_size=2000)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0022_assignment_first_submission"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ActiveSpan",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[("task", "Feedback task"), ("demonstration", "Demonstration")], max_length=16
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("ended_at", models.DateTimeField()),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ("user", "started_at", "id"),
                "indexes": [
                    models.Index(fields=["user", "kind", "ended_at"], name="active_span_latest"),
                    models.Index(fields=["ended_at"], name="active_span_ended"),
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("ended_at__gte", models.F("started_at"))),
                        name="active_span_ends_after_start",
                    )
                ],
            },
        ),
        migrations.RunPython(spans_from_recorded_time, migrations.RunPython.noop),
    ]
