"""Rounds over the API (researchers): list them in order, start one from sampling runs, read one with
everything it used and made (ids, each object at its own endpoint) and each batch's headline result. A
request goes through ``rounds.check_round_request``, the console form's check."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.feedback.results import headline
from core.inputs import MAX_ID
from training.evaluation.rounds import (
    MAX_NAME,
    MAX_NOTES,
    MAX_RUNS,
    RoundError,
    create_round,
    rm_accuracy,
    round_contents,
)
from training.models import Round


class RoundSerializer(serializers.ModelSerializer):
    contents = serializers.SerializerMethodField(
        help_text="What the round used (policies, reward models) and made (batches with their headline "
        "result, exports, training runs, models, proxy evaluations), by id"
    )

    class Meta:
        model = Round
        fields = ("id", "number", "name", "notes", "sampling_runs", "created_by", "created_at", "contents")
        read_only_fields = fields

    def get_contents(self, round_: Round) -> dict[str, Any]:
        contents = round_contents(round_)
        return {
            "policies": contents.policies,
            "policy_models": [model.pk for model in contents.policy_models],
            "reward_models": [model.pk for model in contents.reward_models],
            "batches": [
                {"id": batch.pk, "name": batch.name, "template": batch.template, "headline": headline(batch)}
                for batch in contents.batches
            ],
            "exports": [export.pk for export in contents.exports],
            "training_runs": [
                {"id": run.pk, "kind": run.kind, "status": run.status, "export": run.export_id}
                for run in contents.training_runs
            ],
            "models": [model.pk for model in contents.checkpoints],
            "proxy_evaluations": [evaluation.pk for evaluation in contents.proxy_evaluations],
            "reward_model_accuracy": rm_accuracy(contents),
        }


class RoundInput(StrictSerializer):
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_NAME)
    notes = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_NOTES)
    sampling_runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        max_length=MAX_RUNS,
        help_text="The sampling runs this turn of the loop made (ids)",
    )


class RoundList(generics.ListAPIView):
    """Rounds in order (round 1 first); POST starts the next one from its sampling runs (201)."""

    permission_classes = (IsResearcher,)
    serializer_class = RoundSerializer

    def get_queryset(self) -> QuerySet[Round]:
        return (
            Round.objects.visible_to(self.request.user).prefetch_related("sampling_runs").order_by("number")
        )

    @extend_schema(request=RoundInput, responses={201: RoundSerializer})
    def post(self, request: Request) -> Response:
        form = RoundInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            created = create_round(request.user, data["name"], data["notes"], data["sampling_runs"])
        except RoundError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": [exc.message]}) from None
        return Response(RoundSerializer(created).data, status=status.HTTP_201_CREATED)


class RoundDetail(generics.RetrieveAPIView):
    """One round with what it used and made."""

    serializer_class = RoundSerializer

    def get_queryset(self) -> QuerySet[Round]:
        return Round.objects.visible_to(self.request.user)
