"""Exports over the API (researchers): request one (queued on the exports worker), watch it, download it."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.serializers import ExportCreateInput, ExportSerializer
from annotation.exports.service import download_response, request_export
from annotation.models import Export
from core.permissions import get_visible_or_404


class ExportList(generics.ListAPIView):
    """Exports, newest first. POST ``{"format", "file_type", and optional filters: "batch", "split",
    "template", "labeler", "since", "until", "source", "include_flagged", "include_gold",
    "include_late"}`` queues one on the exports worker and answers 202 with its job row; a request no
    export can satisfy is a 400 naming the field (the same check as the console page)."""

    permission_classes = (IsResearcher,)
    serializer_class = ExportSerializer

    def get_queryset(self) -> QuerySet[Export]:
        return Export.objects.visible_to(self.request.user)

    @extend_schema(request=ExportCreateInput, responses={202: ExportSerializer})
    def post(self, request: Request) -> Response:
        form = ExportCreateInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        export = request_export(request.user, data["format"], data["filters"], data["file_type"])
        return Response(ExportSerializer(export).data, status=status.HTTP_202_ACCEPTED)


class ExportDetail(generics.RetrieveAPIView):
    """Status, progress, row count and sha256 of one export."""

    serializer_class = ExportSerializer

    def get_queryset(self) -> QuerySet[Export]:
        return Export.objects.visible_to(self.request.user)


class ExportDownload(APIView):
    """The finished file (JSONL or Parquet), through the permission check: the file itself, or with object
    storage a 302 to a presigned URL valid for a few minutes (S3_URL_EXPIRE_SECONDS); 404 until it is done,
    or when its file has been deleted since."""

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple:
        return super().perform_content_negotiation(request, force=True)  # any Accept gets the file

    @extend_schema(
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 302: None},
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        export = get_visible_or_404(Export.objects, request.user, pk=pk)
        return download_response(export)
