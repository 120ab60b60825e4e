"""Corpora (local search indexes) and page snapshots (every page the environment served, by content)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models

from core.jobs.models import JobRow, JobStatus
from core.permissions import ResearchTeamQuerySet
from core.storage import IMPORTS, get_storage


class Corpus(models.Model):
    """A searchable collection of pages, indexed with tantivy under ``CORPUS_INDEX_DIR/<name>``."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    document_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("name",)
        verbose_name_plural = "corpora"

    def __str__(self) -> str:
        return self.name

    @property
    def index_path(self) -> Path:
        return Path(settings.CORPUS_INDEX_DIR) / self.name


ImportStatus = JobStatus  # corpus imports cannot be cancelled: they end done or failed


class CorpusImport(JobRow):
    """One import into a corpus: a job row when queued from the console (status, progress, error), a
    finished row when the command ran it. ``progress`` counts records read while ``total`` is unknown,
    then records indexed out of ``total``."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="imports")
    source = models.CharField(max_length=500, help_text="The uploaded file's name or the server path")
    source_format = models.CharField(max_length=20)
    base_url = models.CharField(max_length=500, blank=True, help_text="Where a folder's pages are served")
    upload = models.CharField(
        max_length=255,
        blank=True,
        help_text="The uploaded copy under MEDIA_ROOT/corpus-imports/ until the job ends",
    )
    progress = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(
        null=True, blank=True, help_text="Records to index, once all are read"
    )
    record_count = models.PositiveIntegerField(null=True, blank=True)

    job_name, task_name = "corpus import", "browser.run_corpus_import"
    queue, task_key = "exports", "import_id"  # the queue of long file jobs

    def __str__(self) -> str:
        return f"{self.corpus}: {self.source} ({self.status})"

    @classmethod
    def discard_partial(cls, pk: int) -> None:
        """Its uploaded copy: no job will read it again (a new import is a new upload)."""
        upload = cls.objects.filter(pk=pk).values_list("upload", flat=True).first()
        if upload:
            get_storage(IMPORTS).delete(upload)  # a name already gone is no error


class PageSnapshot(models.Model):
    """A rendered page exactly as shown, stored once per distinct content (``digest`` = SHA-256)."""

    digest = models.CharField(max_length=64, unique=True)
    url = models.TextField(blank=True)
    title = models.TextField(blank=True)
    kind = models.CharField(max_length=10)
    page = models.JSONField(help_text="browser.engine.page.Page.to_dict()")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.title or self.url or self.kind} [{self.digest[:12]}]"


class WebCacheEntry(models.Model):
    """A live provider's answer kept so the same request is not paid for twice (browser/web_cache.py):
    a search's results (JSON) or a fetched document, keyed by provider, kind, request and day."""

    provider = models.CharField(max_length=20)
    kind = models.CharField(max_length=10)  # "search" | "page"
    key = models.CharField(max_length=64, help_text="SHA-256 of the request (the query and k, or the URL)")
    day = models.DateField(help_text="The UTC day it was fetched: the 'day' policy reuses it that day only")
    url = models.TextField(blank=True, help_text="A page's address after redirects")
    content_type = models.CharField(max_length=100, blank=True)
    is_text = models.BooleanField(default=True)
    body = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(
                fields=("provider", "kind", "key", "day"), name="one_web_cache_entry_a_day"
            )
        ]
        indexes = [models.Index(fields=("provider", "kind", "key", "-day"), name="web_cache_lookup")]

    def __str__(self) -> str:
        return f"{self.provider} {self.kind} {self.key[:12]} ({self.day})"
