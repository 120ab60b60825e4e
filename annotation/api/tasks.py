"""Labelers' tasks over the API: what the task page shows (blind: no sources, no answer ids, only slots),
next task, draft, submit and skip, all through ``annotation.feedback.assignment``."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsLabeler, IsLabelerOrResearcher
from annotation.api.strict import StrictSerializer
from annotation.feedback import assignment as work
from annotation.feedback import progress
from annotation.feedback.presenter import task_context
from annotation.feedback.scales import COMPARISON_SCALE, QUESTION_FLAGS
from annotation.feedback.steps import STEP_RATINGS, STEP_REASONS
from annotation.feedback.validation import MAX_SKIP_REASON, input_errors, skip_reason_error
from annotation.models import Assignment, AssignmentStatus
from annotation.workforce import gate

QUOTE_KEYS = ("title", "url", "domain", "extract")


def task_data(task: Assignment) -> dict[str, Any]:
    """The task as its page shows it, as JSON. Never the answers' ids or sources: the page is blind."""
    context = task_context(task)
    batch = task.item.batch
    revision = context["revision"]
    # Why its labeler may not change it now (paused, revoked, past the screening test): "" when they may.
    closed = work.standing_refusal(task, task.labeler)
    reviewing, preferring = batch.template == "step_review", batch.template == "step_preference"
    return {
        "id": task.pk,
        "status": task.status,
        "closed_reason": closed.removeprefix("Not saved: "),
        "template": batch.template,
        "preset": batch.preset,
        "screening": batch.is_screening,
        "instructions": batch.instructions,
        "leased_until": task.leased_until,
        "submitted_at": task.submitted_at,
        # Until when a new submit may replace the response (null before the first submit), and whether now.
        "revisable_until": revision.revisable_until if revision else None,
        "revisable": bool(revision and revision.revisable and not closed),
        "question": context["question"],
        "answers": [
            {
                "slot": slot["slot"],
                "text": slot["text"],
                "quotes": [
                    {"index": quote["index"], **{key: quote.get(key, "") for key in QUOTE_KEYS}}
                    for quote in slot["quotes"]
                ],
            }
            for slot in context["slots"]
        ],
        "scale": [{"code": code, "label": label} for code, label in COMPARISON_SCALE]
        if context["scales"] or preferring
        else [],
        "dimensions": [{"code": s["code"], "label": s["label"]} for s in context["scales"]],
        "question_flags": [{"code": code, "label": label} for code, label in QUESTION_FLAGS]
        if batch.template == "webgpt_comparison"
        else [],
        "rating_fields": [
            {
                "code": field["code"],
                "label": field["label"],
                "help": field["help"],
                "min_words": field["min_words"],
                "choices": [option["code"] for option in field["options"]],
            }
            for field in context["rating_fields"]
        ],
        # A step review (template step_review): the episode replayed step by step, as the model saw it
        # (never who browsed), the answer it wrote, and the choices of a step's rating and reason.
        "steps": [
            {
                "index": step["index"],
                "observation": step["observation"],
                "action": step["command"],
                "valid": step["valid"],
                "message": step["message"],
            }
            for step in context.get("steps", ())
        ],
        "written_answer": {"text": context["episode_answer"], "quotes": context["episode_quotes"]}
        if reviewing
        else None,
        # A step preference (template step_preference): the state (actions so far, what the model saw) and
        # the two candidate next actions as A and B; never which one the episode took.
        "state": {
            "step": context["state_index"],
            "previous_actions": context["previous_actions"],
            "observation": context["state_observation"],
        }
        if preferring
        else None,
        "candidates": context.get("candidates", []),
        "step_ratings": [{"code": code, "label": label} for code, label in STEP_RATINGS] if reviewing else [],
        "step_reasons": [{"code": code, "label": label} for code, label in STEP_REASONS]
        if reviewing or preferring
        else [],
        "required": context["required_paths"],
        "required_labels": context["required"],
        "draft": task.draft,
        "response": task.response,
        "flags": task.flags,
        "submit_key": str(context["submit_key"]),
        "version": task.version,
    }


def _json_object(value: Any) -> dict:
    errors = input_errors(value)  # the task page runs the same check on its forms
    if errors:
        raise serializers.ValidationError(errors)
    return value


def _skip_reason(value: str) -> str:
    problem = skip_reason_error(value)  # the task page's rule for reasons
    if problem:
        raise serializers.ValidationError(problem)
    return value


class SubmitInput(StrictSerializer):
    response = serializers.DictField(validators=[_json_object])
    key = serializers.UUIDField(help_text="A fresh UUID per submission; the same key again is a no-op")
    version = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**31 - 1,
        help_text="The task's version you worked from: if it was submitted or skipped since, 409",
    )


class DraftInput(StrictSerializer):
    draft = serializers.DictField(validators=[_json_object])
    version = serializers.IntegerField(
        required=False, min_value=0, max_value=2**31 - 1, help_text="As for submit: 409 when stale"
    )


class SkipInput(StrictSerializer):
    reason = serializers.CharField(
        trim_whitespace=False,
        validators=[_skip_reason],
        help_text=f"Why you give the task back (as on its page; at most {MAX_SKIP_REASON} characters)",
    )


def _own(request: Request, pk: int) -> Assignment:
    task = work.own_assignment(request.user, pk)
    if task is None:
        raise Http404("No such task.")
    return task


def _closed(exc: Exception) -> Response:
    return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)


class TaskNext(APIView):
    """Lease the next task (or return the live one): 201 with the task, 204 when none is waiting for you now
    (``GET /api/tasks/waiting`` says whether the same-question window holds some back, and until when)."""

    permission_classes = (IsLabeler,)

    @extend_schema(request=None, responses={201: OpenApiTypes.OBJECT, 204: None})
    def post(self, request: Request) -> Response:
        task = work.next_assignment(request.user)
        if task is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(task_data(_own(request, task.pk)), status=status.HTTP_201_CREATED)


class TaskDetail(APIView):
    permission_classes = (IsLabelerOrResearcher,)  # a researcher: their own reference tasks

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        return Response(task_data(_own(request, pk)))


class TaskSubmit(APIView):
    """Submit ``{"response": {...}, "key": "<uuid>", "version": n}``: 200 ``{"complete": true, "late": false,
    "flags": [...]}``, or 400 with ``errors`` by field path (the response is kept as the draft); 409 when the
    task is closed, or when ``version`` is older than the task's (``task`` then holds its current state).
    After the lease ran out the slot is taken back if free; if someone else has it the response is stored
    all the same as a late submission (``"late": true``: researchers see it, exports leave it out)."""

    permission_classes = (IsLabelerOrResearcher,)  # a researcher: their own reference tasks

    @extend_schema(
        request=SubmitInput,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, pk: int) -> Response:
        task = _own(request, pk)
        body = SubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        key: uuid.UUID = body.validated_data["key"]
        version = body.validated_data.get("version")
        try:
            result = work.submit(task.pk, request.user, body.validated_data["response"], key, version=version)
        except work.TaskClosed as exc:
            return _closed(exc)
        if result.stale:
            current = {"detail": work.STALE_TASK, "task": task_data(_own(request, pk))}
            return Response(current, status=status.HTTP_409_CONFLICT)
        if result.repeated:
            flags = result.assignment.flags
            return Response({"complete": True, "late": result.late, "flags": flags, "repeated": True})
        if not result.validation.complete:
            errors = {"complete": False, "late": result.late, "errors": result.validation.errors}
            return Response(errors, status=status.HTTP_400_BAD_REQUEST)
        flags = list(result.validation.flags)
        return Response({"complete": True, "late": result.late, "flags": flags, "repeated": False})


class TaskDraft(APIView):
    """Keep work in progress ``{"draft": {...}}`` on the server (renews the lease)."""

    permission_classes = (IsLabelerOrResearcher,)  # a researcher: their own reference tasks

    @extend_schema(request=DraftInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        task = _own(request, pk)
        body = DraftInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            draft, version = body.validated_data["draft"], body.validated_data.get("version")
            saved = work.save_draft(task.pk, request.user, draft, version=version)
        except work.TaskClosed as exc:
            return _closed(exc)
        # late: the lease ran out and the slot went to someone else; a submit is then stored as late.
        return Response({"saved_at": timezone.now(), "late": saved.status == AssignmentStatus.EXPIRED})


class TaskSkip(APIView):
    """Give the task back ``{"reason": "..."}``, as the task page's skip: its slot returns to the pool and it
    is never handed to you again (also after the lease ran out). 200; 400 by field; 409 when the task is
    not in progress (submitted, late, skipped)."""

    permission_classes = (IsLabelerOrResearcher,)  # a researcher: their own reference tasks

    @extend_schema(request=SkipInput, responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        task = _own(request, pk)
        body = SkipInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            work.skip(task.pk, request.user, body.validated_data["reason"])
        except work.TaskClosed as exc:
            return _closed(exc)
        return Response({"status": "skipped"})


class TaskWaiting(APIView):
    """What is waiting for you, by the rule "next task" follows: ``kinds`` (per template and preset, the
    items it could hand you now), ``held_back`` (items only the same-question window keeps from you, and
    when the first comes back: null while it waits on a task you hold; with the sentence the task page
    shows) and ``submitted_today`` (since midnight in the site's time zone). When next answers 204, this
    says whether work waits behind the window."""

    permission_classes = (IsLabeler,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        now = timezone.now()
        waiting = progress.waiting(request.user, now)
        held = waiting.held
        return Response(
            {
                "kinds": [
                    {
                        "template": k.template,
                        "preset": k.preset,
                        "label": k.label,
                        "count": k.count,
                        "more": k.more,
                    }
                    for k in waiting.kinds
                ],
                "held_back": {
                    "count": held.count,
                    "next_at": held.next_at,
                    "detail": held.message if held.count else "",
                },
                "submitted_today": progress.submitted_today(request.user, now),
                # The gate: kinds of work this labeler gets only a screening test of, or none of.
                "gate": [
                    {"kind": n.kind, "label": n.label, "state": n.state, "detail": n.text}
                    for n in gate.notices(request.user)
                ],
            }
        )
