"""Runs and models are read in the admin; they change only through their jobs and pages
(training.runs.jobs)."""

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from training.models import ModelCheckpoint, TrainingRun


class ReadOnly(admin.ModelAdmin):
    """Viewing only: a model deleted here would leave its folder behind, a run edited here would lie."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(TrainingRun)
class TrainingRunAdmin(ReadOnly):
    list_display = ("id", "kind", "status", "step", "total_steps", "export", "owner", "created_at")
    list_filter = ("kind", "status")


@admin.register(ModelCheckpoint)
class ModelCheckpointAdmin(ReadOnly):
    list_display = ("id", "name", "kind", "base_model", "path", "run", "created_at")
    list_filter = ("kind",)
