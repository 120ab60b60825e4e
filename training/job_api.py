"""What the API views of the jobs (sampling runs, proxy evaluations) do alike: find a registered model the
request names, and cancel a job, answering with its row as it then stands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core.jobs.models import JobRow
from core.permissions import get_visible_or_404
from training.models import ModelCheckpoint

Job = TypeVar("Job", bound=JobRow)


def visible_checkpoint(request: Request, pk: int | None, field: str) -> ModelCheckpoint | None:
    """The registered model ``pk`` names (None when none is named), or the refusal under ``field`` when
    this user can see no such model."""
    if not pk:
        return None
    found = ModelCheckpoint.objects.visible_to(request.user).filter(pk=pk).first()
    if found is None:
        raise serializers.ValidationError({field: ["no such model"]})
    return found


def cancel_job(
    request: Request,
    model: type[Job],
    pk: int,
    cancel: Callable[[Any, Job], None],
    serializer_class: type[serializers.Serializer],
) -> Response:
    """Asks ``cancel`` to cancel the job (a 404 where this user cannot see it); 202 with its row."""
    job = get_visible_or_404(model.objects, request.user, pk=pk)
    cancel(request.user, job)
    job.refresh_from_db()
    return Response(serializer_class(job).data, status=status.HTTP_202_ACCEPTED)
