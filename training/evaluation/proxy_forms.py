"""The "Evaluate with a validation reward model" form: the validation reward model, the sampling runs and
the bootstrap's seed and resamples. Nothing is checked here beyond the types: the one check of every
input (``training.evaluation.proxy_jobs.check_proxy_request``) serves the page and the API alike, and its
refusal lands on the field it names (``add_run_error``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from core.inputs import parse_id
from core.params import ModelIdsField
from core.permissions import AnyUser
from training.evaluation.proxy import DEFAULT_RESAMPLES
from training.evaluation.proxy_jobs import BOUNDS, MAX_RUNS, ProxyRequest
from training.job_forms import JobRequestForm, checkpoint_label
from training.models import ModelCheckpoint, RunKind, SamplingRun


def run_label(run: SamplingRun) -> str:
    scorer = f"scored by {run.reward_model_name}" if run.reward_model_name else "unscored"
    return f"Sampling run {run.pk}: {run.policy_name}, best-of-{run.n}, {scorer} ({run.get_status_display()})"


class ProxyEvaluationForm(JobRequestForm):
    reward_model = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        label="Validation reward model",
        empty_label="Choose a reward model",
        help_text="Trained on a separate split of questions from the reward model that chose the runs' "
        "answers.",
    )
    runs = ModelIdsField(
        queryset=SamplingRun.objects.none(),
        required=False,
        label="Sampling runs",
        widget=forms.CheckboxSelectMultiple,
        help_text=f"1 to {MAX_RUNS} finished runs: one curve each (runs with different n share the chart).",
    )
    seed = forms.IntegerField(
        initial=0, help_text="The bootstrap's seed: the same seed gives the same intervals."
    )
    resamples = forms.IntegerField(
        initial=DEFAULT_RESAMPLES, help_text="Bootstrap resamples of the questions, for the 95% intervals."
    )

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        models = ModelCheckpoint.objects.visible_to(user).filter(kind=RunKind.RM)
        self.fields["reward_model"].queryset = models
        self.fields["reward_model"].label_from_instance = checkpoint_label
        # A list needs neither the logs nor the scores.
        runs = SamplingRun.objects.visible_to(user).defer("log", "metrics")
        self.fields["runs"].queryset = runs
        self.fields["runs"].label_from_instance = run_label
        for name, (low, high) in BOUNDS.items():
            self.fields[name].widget.attrs.update(min=low, max=high)

    @classmethod
    def prefill(cls, query: QueryDict, user: AnyUser) -> dict[str, Any]:
        """Initial values from a link (``?runs=3&runs=4`` or ``?runs=3,4``, ``&reward_model=7``): the
        runs and the model this user can see; anything else is ignored, never an error."""
        wanted = [part.strip() for value in query.getlist("runs") for part in value.split(",")]
        ids = {parse_id(part) for part in wanted[: MAX_RUNS * 4]} - {None}
        fields = cls(user=user).fields
        initial: dict[str, Any] = {}
        if ids:
            initial["runs"] = list(fields["runs"].queryset.filter(pk__in=ids).values_list("pk", flat=True))
        model = parse_id(query.get("reward_model"))
        if model is not None and fields["reward_model"].queryset.filter(pk=model).exists():
            initial["reward_model"] = model
        return initial

    def proxy_request(self) -> ProxyRequest:
        data = self.cleaned_data
        return ProxyRequest(
            reward_model=data["reward_model"],
            runs=list(data["runs"] or []),
            seed=data["seed"],
            resamples=data["resamples"],
        )
