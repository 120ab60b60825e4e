"""Corpus imports over the API (researchers): queue one on the exports worker, watch its progress. The
request is checked by ``browser.import_requests.check_import_request``, the same check as the console's."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.api.permissions import IsResearcher
from annotation.api.serializers import UploadField
from annotation.api.strict import StrictSerializer
from browser.corpus.readers import FORMATS
from browser.import_jobs import request_corpus_import
from browser.import_requests import UPLOAD_HELP, ImportRequestError, check_import_request
from browser.models import CorpusImport


class CorpusImportInput(StrictSerializer):
    corpus = serializers.CharField(max_length=100, help_text="A new or existing corpus name (a slug)")
    format = serializers.ChoiceField(
        choices=[*FORMATS], required=False, allow_blank=True, help_text="Default: detected"
    )
    file = UploadField(required=False, help_text=UPLOAD_HELP)
    path = serializers.CharField(
        required=False, allow_blank=True, max_length=1000, help_text="A server path inside CORPUS_IMPORT_ROOT"
    )
    base_url = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="Where a folder's pages are served"
    )


class CorpusImportSerializer(serializers.ModelSerializer):
    corpus = serializers.CharField(source="corpus.name", read_only=True)
    format = serializers.CharField(source="source_format", read_only=True)

    class Meta:
        model = CorpusImport
        fields = (
            "id",
            "corpus",
            "source",
            "format",
            "base_url",
            "status",
            "progress",
            "total",
            "record_count",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        )
        extra_kwargs = {
            "progress": {"help_text": "Records read while total is null, then records indexed"},
        }


class CorpusImportList(generics.ListAPIView):
    """Corpus imports, newest first. POST (multipart) ``corpus``, and ``file`` or ``path``, optional
    ``format`` and ``base_url``, queues one on the exports worker and answers 202 with its job row; a
    request no import can satisfy is a 400 naming the field, and nothing is created."""

    permission_classes = (IsResearcher,)
    serializer_class = CorpusImportSerializer
    parser_classes = (MultiPartParser, FormParser)

    def get_queryset(self) -> QuerySet[CorpusImport]:
        return CorpusImport.objects.visible_to(self.request.user).select_related("corpus")

    @extend_schema(request=CorpusImportInput, responses={202: CorpusImportSerializer})
    def post(self, request: Request) -> Response:
        form = CorpusImportInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            checked = check_import_request(
                data["corpus"],
                data.get("format", ""),
                data.get("file"),
                data.get("path", ""),
                data.get("base_url", ""),
            )
        except ImportRequestError as exc:
            field = "format" if exc.field == "source_format" else exc.field
            return Response({field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        job = request_corpus_import(request.user, checked)
        return Response(CorpusImportSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class CorpusImportDetail(generics.RetrieveAPIView):
    """Status and progress of one corpus import: ``progress`` counts records read while ``total`` is null,
    then records indexed out of ``total``; ``record_count`` once done, ``error`` once failed."""

    serializer_class = CorpusImportSerializer

    def get_queryset(self) -> QuerySet[CorpusImport]:
        return CorpusImport.objects.visible_to(self.request.user).select_related("corpus")
