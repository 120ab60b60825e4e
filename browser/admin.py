from django.contrib import admin

from browser.models import Corpus, CorpusImport, PageSnapshot


@admin.register(Corpus)
class CorpusAdmin(admin.ModelAdmin):
    list_display = ("name", "document_count", "updated_at")
    readonly_fields = ("document_count", "created_at", "updated_at")


@admin.register(CorpusImport)
class CorpusImportAdmin(admin.ModelAdmin):
    list_display = ("corpus", "source", "source_format", "record_count", "owner", "created_at")
    readonly_fields = [field.name for field in CorpusImport._meta.fields]


@admin.register(PageSnapshot)
class PageSnapshotAdmin(admin.ModelAdmin):
    list_display = ("digest", "kind", "title", "url", "created_at")
    search_fields = ("digest", "url", "title")
    readonly_fields = [field.name for field in PageSnapshot._meta.fields]
