from django.contrib import admin

from core.models import ApiToken, AuditEntry, WorkerPing


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


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Who has a token, to revoke one (delete). Only a digest is stored: nothing here opens the API."""

    list_display = ("user", "prefix", "created_at")
    search_fields = ("user__username",)
    readonly_fields = ("user", "prefix", "created_at")
    exclude = ("digest",)

    def has_add_permission(self, request: object) -> bool:
        return False  # a token is shown once to whoever makes it: its owner's page, or create_api_token

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
