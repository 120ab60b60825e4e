from django.contrib import admin

from annotation.models import (
    Answer,
    Assignment,
    AssignmentRevision,
    DemonstrationBatch,
    Episode,
    EpisodeAction,
    Export,
    FeedbackBatch,
    FeedbackItem,
    ImportedComparison,
    Question,
    QuestionImport,
)


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


@admin.register(DemonstrationBatch)
class DemonstrationBatchAdmin(admin.ModelAdmin):
    list_display = ("name", "overlap", "is_active", "created_by", "created_at")
    filter_horizontal = ("questions",)


class EpisodeActionInline(admin.TabularInline):
    model = EpisodeAction
    fields = ("index", "command", "valid", "message", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Episode)
class EpisodeAdmin(admin.ModelAdmin):
    # A model sample has no user: its policy says who answered.
    list_display = ("id", "kind", "user", "policy", "question", "status", "end_reason", "started_at")
    list_filter = ("kind", "status", "end_reason")
    raw_id_fields = ("user", "question", "batch")
    readonly_fields = ("state", "settings", "version", "started_at", "finished_at", "last_seen_at")
    inlines = (EpisodeActionInline,)


@admin.register(EpisodeAction)
class EpisodeActionAdmin(admin.ModelAdmin):
    list_display = ("episode", "index", "command", "valid", "created_at")
    readonly_fields = [field.name for field in EpisodeAction._meta.fields]


@admin.register(Answer)
class AnswerAdmin(admin.ModelAdmin):
    list_display = ("id", "question", "source_kind", "created_at")
    list_filter = ("source_kind",)
    raw_id_fields = ("question", "episode")


@admin.register(FeedbackBatch)
class FeedbackBatchAdmin(admin.ModelAdmin):
    list_display = ("name", "template", "preset", "overlap", "is_active", "created_at")
    list_filter = ("template", "is_active")


@admin.register(FeedbackItem)
class FeedbackItemAdmin(admin.ModelAdmin):
    list_display = ("id", "batch", "question", "slots_taken", "is_open", "is_gold")
    list_filter = ("batch", "is_open", "is_gold")
    raw_id_fields = ("question", "answers")


class AssignmentRevisionInline(admin.TabularInline):
    model = AssignmentRevision
    readonly_fields = ("response", "flags", "submitted_at", "replaced_at")
    extra = 0
    can_delete = False


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("id", "labeler", "item", "status", "leased_until", "submitted_at", "flags")
    list_filter = ("status",)
    raw_id_fields = ("item", "labeler")
    inlines = (AssignmentRevisionInline,)


@admin.register(Export)
class ExportAdmin(admin.ModelAdmin):
    list_display = ("id", "export_format", "status", "row_count", "owner", "created_at", "finished_at")
    list_filter = ("export_format", "status")
    readonly_fields = [field.name for field in Export._meta.fields]


@admin.register(ImportedComparison)
class ImportedComparisonAdmin(admin.ModelAdmin):
    list_display = ("id", "question", "score_0", "source", "created_at")
    list_filter = ("source",)
    readonly_fields = [field.name for field in ImportedComparison._meta.fields]
