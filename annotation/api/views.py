"""API views for the research side: questions, episodes, answers and feedback batches. Querysets come from
each model's ``visible_to(user)``: a detail a user may not see is a 404; a list not for their role a 403."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsDemonstratorOrResearcher, IsResearcher
from annotation.api.serializers import (
    AnswerSerializer,
    BatchCreateInput,
    BatchSerializer,
    EpisodeDetailSerializer,
    EpisodeSerializer,
    QuestionImportInput,
    QuestionImportSerializer,
    QuestionSerializer,
)
from annotation.feedback.batches import BatchError, create_batch_from_source
from annotation.models import Answer, Episode, FeedbackBatch, Question, Split
from annotation.questions.formats import QuestionFileError
from annotation.questions.forms import QuestionFilterForm
from annotation.questions.service import import_questions
from core.params import id_param


@extend_schema(
    parameters=[
        OpenApiParameter("dataset", str, description="Only this dataset"),
        OpenApiParameter("split", str, enum=list(Split.values), description="Only this split"),
        OpenApiParameter("q", str, description="Text contains"),
    ]
)
class QuestionList(generics.ListAPIView):
    """The question bank (researchers)."""

    permission_classes = (IsResearcher,)
    serializer_class = QuestionSerializer

    def get_queryset(self) -> QuerySet[Question]:
        form = QuestionFilterForm(self.request.query_params)  # the question list page's filters
        if not form.is_valid():
            raise serializers.ValidationError(form.errors)
        return form.filter(Question.objects.visible_to(self.request.user).order_by("id"))


class QuestionDetail(generics.RetrieveAPIView):
    serializer_class = QuestionSerializer

    def get_queryset(self) -> QuerySet[Question]:
        return Question.objects.visible_to(self.request.user)


class QuestionImportView(APIView):
    """Import a question file (multipart: ``file``, optional ``dataset``, ``format``,
    ``explain_statements``): all of it or nothing; a bad row is a 400 with its line and reason."""

    permission_classes = (IsResearcher,)
    parser_classes = (MultiPartParser, FormParser)

    @extend_schema(request=QuestionImportInput, responses={201: QuestionImportSerializer})
    def post(self, request: Request) -> Response:
        form = QuestionImportInput(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        upload = data["file"]
        try:
            report = import_questions(
                upload,  # its size is checked before it is read, a chunk at a time
                filename=upload.name or "questions",
                user=request.user,
                dataset=data.get("dataset") or None,
                file_format=data.get("format") or None,
                explain_statements=data.get("explain_statements"),
            )
        except QuestionFileError as exc:
            return _file_error("file", exc, "Nothing was imported.")
        return Response(QuestionImportSerializer(report).data, status=status.HTTP_201_CREATED)


def _file_error(field: str, exc: QuestionFileError, outcome: str) -> Response:
    """A file that cannot be imported: the message under the upload's field, and its line and reason."""
    body = {field: [f"{exc}. {outcome}"], "line": exc.line, "reason": exc.reason}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class EpisodeList(generics.ListAPIView):
    """Demonstrations: demonstrators see their own, researchers everyone's."""

    permission_classes = (IsDemonstratorOrResearcher,)
    serializer_class = EpisodeSerializer

    def get_queryset(self) -> QuerySet[Episode]:
        return Episode.objects.visible_to(self.request.user).select_related("question", "user")


class EpisodeDetail(generics.RetrieveAPIView):
    """One episode with its actions (command, validity, message, the observation before) and quotes."""

    serializer_class = EpisodeDetailSerializer

    def get_queryset(self) -> QuerySet[Episode]:
        return (
            Episode.objects.visible_to(self.request.user)
            .select_related("question", "user")
            .prefetch_related("actions")
        )


@extend_schema(parameters=[OpenApiParameter("question", int, description="Only answers to this question")])
class AnswerList(generics.ListAPIView):
    """Answers with their hidden source (researchers only)."""

    permission_classes = (IsResearcher,)
    serializer_class = AnswerSerializer

    def get_queryset(self) -> QuerySet[Answer]:
        answers = Answer.objects.visible_to(self.request.user).order_by("id")
        try:
            question = id_param(self.request.query_params, "question")
        except BadRequest as exc:
            raise serializers.ValidationError({"question": [str(exc)]}) from None
        return answers if question is None else answers.filter(question_id=question)


class AnswerDetail(generics.RetrieveAPIView):
    serializer_class = AnswerSerializer

    def get_queryset(self) -> QuerySet[Answer]:
        return Answer.objects.visible_to(self.request.user)


class BatchList(generics.ListAPIView):
    """Feedback batches with progress (researchers); POST creates one like the console's form: JSON, or
    multipart with an ``answers_file`` for ``source=file`` (imported and batched in one transaction; a bad
    line is a 400 with its ``line`` and ``reason`` and leaves nothing behind)."""

    permission_classes = (IsResearcher,)
    serializer_class = BatchSerializer

    def get_queryset(self) -> QuerySet[FeedbackBatch]:
        batches = FeedbackBatch.objects.visible_to(self.request.user).prefetch_related("sampling_runs")
        return batches.order_by("-created_at", "-id")

    @extend_schema(request=BatchCreateInput, responses={201: BatchSerializer})
    def post(self, request: Request) -> Response:
        form = BatchCreateInput(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data.get("answers_file")
        try:
            batch = create_batch_from_source(
                request.user,
                form.batch_settings(),
                form.validated_data["source"],
                upload,  # read a chunk at a time, after its size is checked
                gold_pairs=form.validated_data["gold_pairs"],
            )
        except QuestionFileError as exc:
            return _file_error("answers_file", exc, "Nothing was created.")
        except BatchError as exc:
            field = exc.field or "non_field_errors"
            return Response({field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(BatchSerializer(batch).data, status=status.HTTP_201_CREATED)


class BatchDetail(generics.RetrieveAPIView):
    serializer_class = BatchSerializer

    def get_queryset(self) -> QuerySet[FeedbackBatch]:
        return FeedbackBatch.objects.visible_to(self.request.user).prefetch_related("sampling_runs")
