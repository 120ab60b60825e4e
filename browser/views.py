"""Researcher pages for corpora: the list with an import form, and an import's progress (htmx)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from browser.corpus.readers import FORMATS
from browser.import_jobs import request_corpus_import
from browser.import_requests import UPLOAD_HELP, ImportRequestError, check_import_request
from browser.models import Corpus, CorpusImport
from core.permissions import Role, get_visible_or_404, role_required

FORMAT_CHOICES = [("", "Detect"), *[(f, f) for f in FORMATS]]


class CorpusImportForm(forms.Form):
    """The page's fields; what an import may ask for is checked by ``check_import_request``, the same
    check as the API's."""

    corpus = forms.CharField(
        max_length=100, help_text="A new or existing corpus name: letters, digits, - and _"
    )
    source_format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False, label="Format")
    file = forms.FileField(required=False, label="Corpus file", help_text=UPLOAD_HELP)
    path = forms.CharField(
        required=False, max_length=1000, label="Or a server path", help_text="Inside the import folder"
    )
    base_url = forms.CharField(
        required=False,
        max_length=500,
        label="Base URL",
        help_text="For a folder of pages: where they are served, e.g. https://example.org/",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        root = settings.CORPUS_IMPORT_ROOT
        self.fields["path"].help_text = f"Inside {root}" if root else "Off: CORPUS_IMPORT_ROOT is not set"

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            data["request"] = check_import_request(
                data["corpus"], data["source_format"], data["file"], data["path"], data["base_url"]
            )
        except ImportRequestError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
        return data


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def corpus_list(request: HttpRequest) -> HttpResponse:
    form = CorpusImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        job = request_corpus_import(request.user, form.cleaned_data["request"])
        return redirect("console:corpus_import", pk=job.pk)
    latest = CorpusImport.objects.filter(corpus=OuterRef("pk")).order_by("-created_at", "-id").values("pk")
    corpora = list(Corpus.objects.visible_to(request.user).annotate(last_import_id=Subquery(latest[:1])))
    last = CorpusImport.objects.in_bulk([c.last_import_id for c in corpora if c.last_import_id])
    rows = [(corpus, last.get(corpus.last_import_id)) for corpus in corpora]
    imports = CorpusImport.objects.visible_to(request.user).select_related("corpus", "owner")[:20]
    context = {"form": form, "rows": rows, "imports": imports, "default_corpus": settings.DEFAULT_CORPUS}
    return render(request, "console/corpora.html", context, status=400 if form.errors else 200)


@require_GET
@login_required  # visibility decides: for anyone but researchers an import does not exist (404)
@vary_on_headers("HX-Request")
def corpus_import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_visible_or_404(CorpusImport.objects.select_related("corpus", "owner"), request.user, pk=pk)
    template = "console/corpora_import_status.html" if request.htmx else "console/corpora_import.html"
    return render(request, template, {"job": job})
