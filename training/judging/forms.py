"""The "Judge this batch" form: the judge (a registered reward model or an endpoint) and its settings.
Ranges are not checked here: ``judging.runs.request_judge_run`` checks every input for the pages, the API
and the ``judge_batch`` command alike, and its refusal lands on the field it names (``add_run_error``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from annotation.models import FeedbackBatch
from core.permissions import AnyUser
from training.job_forms import JobRequestForm, checkpoint_label
from training.judging.runs import (
    BOUNDS,
    DEFAULTS,
    ENDPOINT_SETTINGS,
    REWARD_MODEL_SETTINGS,
    JudgeRequest,
)
from training.models import ModelCheckpoint, RunKind

REWARD_MODEL, ENDPOINT = "rm", "endpoint"


class JudgeForm(JobRequestForm):
    judge = forms.ChoiceField(
        choices=(),
        help_text="A registered reward model (scores the answers: the overall rating only) or a language "
        "model behind an endpoint the operator configured (the prompt asks every field of the task).",
    )
    limit = forms.IntegerField(label="Items", help_text="The batch's first items (by id) to judge.")
    seed = forms.IntegerField(
        help_text="Draws each item's order and seeds each request: the same seed asks the same."
    )
    tie_margin = forms.FloatField(
        help_text="Reward model: a score difference up to this many preference logits is a tie (0.1 ≈ 52.5%)."
    )
    much_margin = forms.FloatField(
        label="Much-better margin",
        help_text="Reward model: beyond this difference, “much better” (1.0 ≈ 73%).",
    )
    temperature = forms.FloatField(help_text="Language model: 0 asks for its single best verdict.")
    max_tokens = forms.IntegerField(help_text="Language model: the longest verdict, in tokens.")
    check_claims = forms.BooleanField(
        required=False,
        help_text="Language model, WebGPT comparisons: also check each labeler's claim annotations against "
        "their linked quotes (shown on the flag review page).",
    )
    route = forms.BooleanField(
        required=False,
        help_text="Let the judge's confident verdicts that agree in both orders decide their items; the "
        "rest, and an audit share, go to labelers.",
    )
    confidence_threshold = forms.FloatField(help_text="Routing: the confidence a verdict needs to decide.")
    audit_share = forms.FloatField(
        help_text="Routing: the share of judge-decided items labelers check anyway."
    )

    def __init__(self, *args: Any, user: AnyUser, batch: FeedbackBatch, **kwargs: Any) -> None:
        kwargs["initial"] = dict(DEFAULTS) | kwargs.get("initial", {})
        super().__init__(*args, **kwargs)
        self.batch = batch
        models = ModelCheckpoint.objects.visible_to(user).filter(kind=RunKind.RM).order_by("-pk")
        self.models = {str(model.pk): model for model in models}
        self.fields["judge"].choices = [
            *(
                (f"{REWARD_MODEL}:{pk}", f"{checkpoint_label(m)}: reward model")
                for pk, m in self.models.items()
            ),
            *(
                (f"{ENDPOINT}:{name}", f"{name}: {endpoint.model} (endpoint)")
                for name, endpoint in settings.SAMPLING_ENDPOINTS.items()
                if endpoint.policy == "prompted"  # a judge is an instruct model given instructions
            ),
        ]
        for name, (low, high) in BOUNDS.items():
            # The browser is told the range, to say so before a round trip; the service decides.
            self.fields[name].widget.attrs.update(min=low, max=high)
            if name not in ("max_tokens", "seed", "limit"):
                self.fields[name].widget.attrs["step"] = "any"

    def judge_request(self) -> JudgeRequest:
        data = self.cleaned_data
        kind, _, name = data["judge"].partition(":")
        by_model = kind == REWARD_MODEL
        # Only the settings of the judge chosen: the others' fields keep their defaults on the page.
        skipped = ENDPOINT_SETTINGS - {"check_claims"} if by_model else REWARD_MODEL_SETTINGS
        values = {name: data[name] for name in DEFAULTS if name not in skipped}
        return JudgeRequest(
            batch=self.batch,
            reward_model=self.models[name] if by_model else None,
            endpoint="" if by_model else name,
            settings=values,
        )
