"""Training runs and the model registry over the API (researchers): start a run from an export (or an RL
run from questions and a reward model), watch it, cancel it; list, read and delete registered models. A run
request goes through the same checks as the new-run pages and the commands (training.runs.inputs via
jobs.request_run; training.rl.inputs via training.rl.runs); refusals come back by field."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.api.strict import StrictSerializer
from annotation.models import Export
from core.inputs import MAX_ID
from core.permissions import get_visible_or_404
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind, TrainingRun
from training.rl.api import RL_ONLY, rl_errors, rl_request
from training.rl.inputs import MAX_QUESTIONS
from training.rl.runs import request_rl_run
from training.runs import jobs
from training.runs.config import RM_PRESETS
from training.runs.inputs import PRESET_MODELS, SETTABLE
from training.sampling.api import QuestionSetInput


class CheckpointSerializer(serializers.ModelSerializer):
    # As the pages show it: relative to the model store, so that the server's absolute paths stay private.
    path = serializers.CharField(source="store_path", read_only=True)

    class Meta:
        model = ModelCheckpoint
        fields = ("id", "name", "kind", "base_model", "path", "metrics", "run", "created_at")
        read_only_fields = fields


class TrainingRunSerializer(serializers.ModelSerializer):
    checkpoint = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    percent = serializers.IntegerField(read_only=True)
    question_count = serializers.SerializerMethodField()

    class Meta:
        model = TrainingRun
        fields = (
            "id", "kind", "export", "base_checkpoint", "preset", "config", "status", "cancel_requested",
            "step", "total_steps", "percent", "timeline", "metrics", "log", "error", "checkpoint",
            "reward_model", "reward_model_name", "question_source", "question_count", "samples",
            "created_at", "started_at", "finished_at", "resumes",
        )  # fmt: skip
        read_only_fields = fields

    def get_question_count(self, run: TrainingRun) -> int:
        return len(run.question_ids)


class TrainingRunInput(StrictSerializer):
    kind = serializers.ChoiceField(choices=RunKind.choices)
    export = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="A finished export: bc-pairs for bc, rm-pairs/rm-groups for rm (required); none for rl",
    )
    preset = serializers.ChoiceField(choices=list(RM_PRESETS), required=False, allow_blank=True)
    base_checkpoint = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="A registered model to start from (or to evaluate), by id",
    )
    settings = serializers.DictField(
        required=False,
        default=dict,
        help_text="Trainer settings (max_steps, learning_rate, ...; for rl: steps, group_size, kl_coef, "
        f"...), each within its range; base_model is a preset ({', '.join(PRESET_MODELS)}), never a path",
    )
    reward_model = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="rl: the registered reward model the policy is trained against, by id (required)",
    )
    questions = QuestionSetInput(
        required=False, help_text="rl: which questions of the rl split: batch, dataset; and limit"
    )
    question_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        required=False,
        max_length=MAX_QUESTIONS,
        help_text="rl: the questions by id (all of the rl split), instead of questions",
    )
    search = serializers.CharField(
        required=False, default="local", max_length=20, help_text="rl: where browsing episodes search"
    )
    corpus = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=100, help_text="rl: the local corpus"
    )


class TrainingRunList(generics.ListAPIView):
    """Runs, newest first; POST starts one (queued on the training worker) and answers 202."""

    permission_classes = (IsResearcher,)
    serializer_class = TrainingRunSerializer

    def get_queryset(self) -> QuerySet[TrainingRun]:
        return TrainingRun.objects.visible_to(self.request.user).select_related("checkpoint")

    @extend_schema(request=TrainingRunInput, responses={202: TrainingRunSerializer})
    def post(self, request: Request) -> Response:
        form = TrainingRunInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if data["kind"] == RunKind.RL:
            return self.post_rl(request, data)
        if not data.get("export"):
            raise serializers.ValidationError({"export": ["This field is required."]})
        rl_only = sorted(set(RL_ONLY) & set(request.data))
        if rl_only:
            raise serializers.ValidationError({name: ["only an rl run takes this"] for name in rl_only})
        export = Export.objects.visible_to(request.user).filter(pk=data["export"]).first()
        if export is None:
            raise serializers.ValidationError({"export": ["no such export"]})
        base = None
        if data.get("base_checkpoint"):
            base = ModelCheckpoint.objects.visible_to(request.user).filter(pk=data["base_checkpoint"]).first()
            if base is None:
                raise serializers.ValidationError({"base_checkpoint": ["no such model"]})
        try:
            run = jobs.request_run(
                request.user, data["kind"], export, data["settings"], data.get("preset") or "", base
            )
        except RunError as exc:
            raise serializers.ValidationError(_by_field(exc)) from None
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    def post_rl(self, request: Request, data: dict[str, Any]) -> Response:
        if data.get("export") or data.get("preset"):
            name = "export" if data.get("export") else "preset"
            raise serializers.ValidationError({name: ["an rl run learns from questions, not an export"]})
        try:
            run = request_rl_run(request.user, rl_request(request, data))
        except RunError as exc:
            raise serializers.ValidationError(rl_errors(exc)) from None
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


def _by_field(exc: RunError) -> dict[str, Any]:
    """A refusal under the input it is about; a setting's under ``settings`` by its name."""
    if exc.field in TrainingRunInput().fields:
        return {exc.field: [exc.reason]}
    if exc.field in SETTABLE:
        return {"settings": {exc.field: [exc.reason]}}
    return {"non_field_errors": [str(exc)]}


class TrainingRunDetail(generics.RetrieveAPIView):
    """One run: status, progress, metrics timeline, final metrics, log and error."""

    serializer_class = TrainingRunSerializer

    def get_queryset(self) -> QuerySet[TrainingRun]:
        return TrainingRun.objects.visible_to(self.request.user)


class TrainingRunCancel(APIView):
    """Cancel: a queued run at once, a running one after its current step."""

    @extend_schema(request=None, responses={202: TrainingRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        run = get_visible_or_404(TrainingRun.objects, request.user, pk=pk)
        jobs.cancel_run(request.user, run)
        run.refresh_from_db()
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class TrainingRunResume(APIView):
    """Resume a failed run from its latest checkpoint: queued again, it continues after the checkpoint's step
    (409 when the run is not failed or has no checkpoint)."""

    @extend_schema(request=None, responses={202: TrainingRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        run = get_visible_or_404(TrainingRun.objects, request.user, pk=pk)
        try:
            jobs.resume_run(request.user, run)
        except RunError as exc:
            return Response({"detail": exc.reason}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class CheckpointList(generics.ListAPIView):
    """Registered models, newest first."""

    permission_classes = (IsResearcher,)
    serializer_class = CheckpointSerializer

    def get_queryset(self) -> QuerySet[ModelCheckpoint]:
        return ModelCheckpoint.objects.visible_to(self.request.user)


class CheckpointDetail(generics.RetrieveDestroyAPIView):
    """One registered model; DELETE removes it and its folder in the model store (409 while a queued or
    running run starts from it)."""

    serializer_class = CheckpointSerializer

    def get_queryset(self) -> QuerySet[ModelCheckpoint]:
        return ModelCheckpoint.objects.visible_to(self.request.user)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        try:
            jobs.delete_checkpoint(request.user, self.get_object())
        except RunError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)
