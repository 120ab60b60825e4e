from django.contrib import admin

from webgpt_site.models import AuditEntry, WorkerPing


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor", "action", "object_type", "object_id")
    list_filter = ("action",)
    readonly_fields = [field.name for field in AuditEntry._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False  # the audit log is written by the application only


@admin.register(WorkerPing)
class WorkerPingAdmin(admin.ModelAdmin):
    list_display = ("queue", "requested_at", "answered_at", "worker_hostname", "requested_by")
    readonly_fields = [field.name for field in WorkerPing._meta.fields]
