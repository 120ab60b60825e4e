"""A feedback batch's results over the API: the figures of its results page (``results.batch_results``),
for whoever may read the batch (``api-batch``: researchers; anyone else gets the 404 of a missing batch)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.feedback.results import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RESAMPLES_RANGE,
    SEED_RANGE,
    SettingsError,
    batch_results,
    parse_settings,
)
from annotation.models import FeedbackBatch
from webgpt_site.permissions import get_visible_or_404


class BatchResults(APIView):
    """Preference for side A over side B (overall and per dimension), the rating presets' rates and the
    selective-prediction curve, labeler agreement and counts; every figure with its 95% bootstrap interval
    by question and the judgements and questions behind it (value null: no judgements)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "seed",
                int,
                description=f"Bootstrap seed, {SEED_RANGE[0]} to {SEED_RANGE[1]} (default {DEFAULT_SEED})",
            ),
            OpenApiParameter(
                "resamples",
                int,
                description=f"Bootstrap resamples, {RESAMPLES_RANGE[0]} to {RESAMPLES_RANGE[1]} "
                f"(default {DEFAULT_RESAMPLES})",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, pk: int) -> Response:
        batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
        try:
            seed, resamples = parse_settings(request.query_params)
        except SettingsError as exc:
            return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(batch_results(batch, seed=seed, resamples=resamples))
