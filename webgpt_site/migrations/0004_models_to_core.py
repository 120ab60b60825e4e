"""The audit log, worker pings and API tokens moved to the core app (core/0001): they leave this app's state
only; their tables and rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("webgpt_site", "0003_api_tokens_as_digests"),
        ("core", "0001_models_to_core"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="auditentry", name="actor"),
                migrations.RemoveField(model_name="workerping", name="requested_by"),
                migrations.DeleteModel(name="ApiToken"),
                migrations.DeleteModel(name="AuditEntry"),
                migrations.DeleteModel(name="WorkerPing"),
            ],
            database_operations=[],
        ),
    ]
