from django.contrib import admin

from annotation.models import Question, QuestionImport


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ("id", "text", "dataset", "split", "external_id")
    list_filter = ("split", "dataset")
    search_fields = ("text", "external_id")
    readonly_fields = ("key", "source_import", "created_at")


@admin.register(QuestionImport)
class QuestionImportAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "filename",
        "file_format",
        "created_count",
        "duplicate_count",
        "created_by",
        "created_at",
    )
    readonly_fields = [field.name for field in QuestionImport._meta.fields]
