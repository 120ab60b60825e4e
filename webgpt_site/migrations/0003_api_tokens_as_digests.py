"""API tokens as digests (``ApiToken``), in place of DRF's tokens stored in the clear.

A database that used ``rest_framework.authtoken`` holds its tokens in ``authtoken_token``: each becomes a
digest, so the scripts that hold one keep working, and then the table goes, with DRF's record of having made
it (the app is no longer installed; installed again, it would make its table anew). A new database has no
such table. Going back drops the digests: they cannot give the tokens back.
"""

import hashlib
from datetime import UTC

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.db.migrations.recorder import MigrationRecorder

# The digest (SHA-256) and prefix as webgpt_site.api_tokens made them when this was written: a migration
# keeps its own copy, so it does the same whatever that module becomes.
PREFIX_LENGTH = 6


def digest_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    with connection.cursor() as cursor:
        cursor.execute('SELECT "key", "user_id", "created" FROM "authtoken_token"')
        rows = cursor.fetchall()
    ApiToken = apps.get_model("webgpt_site", "ApiToken")
    ApiToken.objects.bulk_create(
        ApiToken(
            user_id=user_id,
            digest=hashlib.sha256(key.encode()).hexdigest(),
            prefix=key[:PREFIX_LENGTH],
            # SQLite gives a raw query's times naive; they are UTC, as Django stores them.
            created_at=created if django.utils.timezone.is_aware(created) else created.replace(tzinfo=UTC),
        )
        for key, user_id, created in rows
    )
    schema_editor.execute('DROP TABLE "authtoken_token"')
    MigrationRecorder(connection).migration_qs.filter(app="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("webgpt_site", "0002_role_groups"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("prefix", models.CharField(max_length=8)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_token",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"verbose_name": "API token"},
        ),
        migrations.RunPython(digest_legacy_tokens, migrations.RunPython.noop),
    ]
