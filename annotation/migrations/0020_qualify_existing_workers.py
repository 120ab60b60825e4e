"""Qualify everyone who already did work of a kind before screening existed, so no team is locked out by
the upgrade that brings the gate; each qualification is recorded as such in the audit trail."""

from django.db import migrations

UPGRADE_REASON = "Qualified by the upgrade: had submitted work of this kind before screening tests existed"


def kind_of(template: str, preset: str) -> str:
    # Frozen copy of annotation.models.workforce.work_kind: a migration must not import live code.
    return f"rating:{preset}" if template == "rating" else template


def qualify_existing(apps, schema_editor):
    Assignment = apps.get_model("annotation", "Assignment")
    Episode = apps.get_model("annotation", "Episode")
    Qualification = apps.get_model("annotation", "Qualification")
    QualificationEvent = apps.get_model("annotation", "QualificationEvent")
    pairs = set()
    done = Assignment.objects.filter(status__in=("submitted", "late")).values_list(
        "labeler_id", "item__batch__template", "item__batch__preset"
    )
    for labeler, template, preset in done.distinct():
        pairs.add((labeler, kind_of(template, preset)))
    demonstrators = Episode.objects.filter(kind="human", status="finished").values_list("user_id", flat=True)
    pairs |= {(user, "demonstration") for user in demonstrators.distinct()}
    for user, kind in sorted(pairs):
        Qualification.objects.create(user_id=user, kind=kind, state="qualified", reason=UPGRADE_REASON)
        QualificationEvent.objects.create(
            user_id=user, kind=kind, from_state="applicant", to_state="qualified", reason=UPGRADE_REASON
        )


class Migration(migrations.Migration):
    dependencies = [("annotation", "0019_workforce")]

    operations = [migrations.RunPython(qualify_existing, migrations.RunPython.noop)]
