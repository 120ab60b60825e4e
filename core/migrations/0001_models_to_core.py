# The audit log, worker pings and API tokens, moved here from webgpt_site with their tables (see STATE).

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


STATE = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(max_length=64, unique=True)),
                ('prefix', models.CharField(max_length=8)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='api_token', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'API token',
                'db_table': 'webgpt_site_apitoken',
            },
        ),
        migrations.CreateModel(
            name='AuditEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('action', models.CharField(max_length=100)),
                ('object_type', models.CharField(blank=True, max_length=100)),
                ('object_id', models.CharField(blank=True, max_length=64)),
                ('data', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'audit entries',
                'db_table': 'webgpt_site_auditentry',
                'ordering': ('-created_at', '-id'),
            },
        ),
        migrations.CreateModel(
            name='WorkerPing',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queue', models.CharField(max_length=30)),
                ('requested_at', models.DateTimeField(auto_now_add=True)),
                ('answered_at', models.DateTimeField(blank=True, null=True)),
                ('worker_hostname', models.CharField(blank=True, max_length=255)),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'webgpt_site_workerping',
                'ordering': ('-requested_at', '-id'),
            },
        ),
]


class Migration(migrations.Migration):

    initial = True

    # The tables were made by webgpt_site's migrations (0001, 0003): here the models enter core's state only.
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("webgpt_site", "0003_api_tokens_as_digests"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=STATE, database_operations=[]),
    ]
