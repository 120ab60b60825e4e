"""A feedback batch's results over the API: the figures of its results page (``results.batch_results``),
for whoever may read the batch (``api-batch``: researchers; anyone else gets the 404 of a missing batch)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.feedback.result_stats import SETTINGS_HELP, SettingsError
from annotation.feedback.results import JUDGE_VERDICTS_HELP, results_for_query
from annotation.models import FeedbackBatch
from core.permissions import get_visible_or_404


class BatchResults(APIView):
    """Preference for side A over side B (overall and per dimension), the rating presets' rates and the
    selective-prediction curve, labeler agreement and counts; every figure with its 95% bootstrap interval
    by question and the judgements and questions behind it (value null: no judgements). ``judges``: each
    judge run's agreement with the labelers, position bias, confusion tables and routing (the figures
    outside it count labelers' judgements only)."""

    @extend_schema(
        parameters=[
            *(OpenApiParameter(name, int, description=text) for name, text in SETTINGS_HELP.items()),
            OpenApiParameter("judge_verdicts", str, description=JUDGE_VERDICTS_HELP),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, pk: int) -> Response:
        batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
        try:
            return Response(results_for_query(batch, request.query_params))
        except SettingsError as exc:
            return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
