"""The feedback to the people doing the work over the API: "My quality" as JSON for the signed-in labeler or
demonstrator, and a researcher's review of a demonstration."""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsLabelerOrDemonstrator, IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.models import Episode
from annotation.workforce.quality import report
from annotation.workforce.reviews import GRADES, MAX_COMMENT, ReviewError, save_review


class MyQuality(APIView):
    """Your own figures, as the "My quality" page shows them: ``kinds`` (per kind of work: state, the
    reason when paused or revoked, gold accuracy and agreement with the other labelers, each
    ``{accuracy, count, low, high}`` with its 95% Wilson interval, overall and per ISO week),
    ``disagreements`` (gold items where you differed from the reference, in your display order, with what
    you first submitted (the judgement scored), ``revised`` when you changed it later, the reference and
    the researcher's explanation; only items you can no longer revise: ``withheld`` counts the others and
    ``withheld_until`` says when the first of them is shown), ``screenings`` (your screening scores per
    measure, on your first submissions) and ``reviews`` (researchers' grades and comments on your
    demonstrations). Nothing about other people."""

    permission_classes = (IsLabelerOrDemonstrator,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(asdict(report(request.user)))


class ReviewInput(StrictSerializer):
    grade = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=GRADES[0],
        max_value=GRADES[1],
        help_text="1-7 (required on a screening test's demonstration)",
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_COMMENT, trim_whitespace=False, default=""
    )


class EpisodeReview(APIView):
    """Review a finished demonstration ``{"grade": 1-7, "comment": "..."}``: 200 with the review (yours
    replaces your earlier one); 400 by field, or ``detail`` when the episode cannot be reviewed (a model's
    sample, not finished, a screening demonstration without a grade)."""

    permission_classes = (IsResearcher,)

    @extend_schema(request=ReviewInput, responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        episode = get_object_or_404(Episode.objects.visible_to(request.user).select_related("batch"), pk=pk)
        body = ReviewInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            review = save_review(
                episode, request.user, body.validated_data.get("grade"), body.validated_data["comment"]
            )
        except ReviewError as exc:
            problem = {exc.field: [str(exc)]} if exc.field else {"detail": str(exc)}
            return Response(problem, status=status.HTTP_400_BAD_REQUEST)
        data = {
            "episode": episode.pk,
            "grade": review.grade,
            "comment": review.comment,
            "reviewed_at": review.reviewed_at,
        }
        return Response(data)
