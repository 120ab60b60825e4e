"""What the forms of the jobs (training runs, sampling runs, proxy evaluations) do alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django import forms

from training.errors import RunError
from training.models import ModelCheckpoint

Job = TypeVar("Job")


def checkpoint_label(checkpoint: ModelCheckpoint) -> str:
    return f"{checkpoint.name} ({checkpoint.kind}, from {checkpoint.base_model})"


class JobRequestForm(forms.Form):
    """A form that asks a service for a job (a training run, a sampling run, a proxy evaluation). The
    service makes the one check of every input, for the pages and the API alike; its refusal lands here
    on the field it names."""

    def add_run_error(self, exc: RunError) -> None:
        """The service's refusal on the field it names, or on the whole form."""
        if exc.field in self.fields:
            self.add_error(exc.field, exc.reason[0].upper() + exc.reason[1:] + ".")
        else:
            message = str(exc)
            self.add_error(None, message[0].upper() + message[1:] + ". Nothing was started.")

    def start(self, request_job: Callable[[], Job]) -> Job | None:
        """The job ``request_job`` created, or None with its refusal on the form."""
        try:
            return request_job()
        except RunError as exc:
            self.add_run_error(exc)
            return None
