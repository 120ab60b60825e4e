"""Each judgement keeps its first submission: gold checks and screening tests score it, the revision window
runs from it and a revocation's exclusion is decided by it. Existing judgements get theirs from their
history: the oldest revision kept, or the response itself when it was never revised."""

from django.db import migrations, models


def backfill_first_submission(apps, schema_editor):
    Assignment = apps.get_model("annotation", "Assignment")
    AssignmentRevision = apps.get_model("annotation", "AssignmentRevision")
    judged = Assignment.objects.filter(submitted_at__isnull=False, first_submitted_at__isnull=True)
    for task in judged.iterator(chunk_size=2000):
        oldest = AssignmentRevision.objects.filter(assignment=task).order_by("submitted_at", "id").first()
        if oldest is None:
            task.first_submitted_at, task.first_response = task.submitted_at, task.response
        else:
            task.first_submitted_at, task.first_response = oldest.submitted_at, oldest.response
        task.save(update_fields=["first_submitted_at", "first_response"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0021_judging"),
    ]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="first_submitted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="assignment",
            name="first_response",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(backfill_first_submission, migrations.RunPython.noop),
    ]
