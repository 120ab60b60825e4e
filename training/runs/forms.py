"""Forms of the training pages: a new run (kind, data, preset, model to start from, main settings) and the
selection of runs to compare."""

from __future__ import annotations

from typing import Any, TypeVar

from django import forms

from annotation.models import Export, ExportStatus
from core.params import ModelIdsField
from core.permissions import AnyUser
from training.job_forms import JobRequestForm, checkpoint_label
from training.models import ModelCheckpoint, RunKind, TrainingRun
from training.runs.config import BOUNDS, PRM_LABELS, RM_PRESETS, BCConfig, RMConfig, default_rm_preset
from training.runs.inputs import FORMATS

Job = TypeVar("Job")

# The settings offered on the form; the rest keep the defaults of training.runs.config.
SETTINGS = (
    "max_steps",
    "epochs",
    "batch_size",
    "learning_rate",
    "max_length",
    "lora_rank",
    "validation_fraction",
    "eval_every",
    "checkpoint_every",
    "processes",
    "resume_attempts",
)
MAX_COMPARED = 8  # one colour each in the chart


def default_text(name: str) -> str:
    """Where a blank setting comes from, read from the config dataclasses and presets themselves."""
    rm = RMConfig()
    values = [f"bc {_default_shown(name, getattr(BCConfig(), name))}"]
    values += [
        f"rm {preset} {_default_shown(name, preset_values.get(name, getattr(rm, name)))}"
        for preset, preset_values in RM_PRESETS.items()
    ]
    return "Blank: the default (" + ", ".join(values) + ")."


def _default_shown(name: str, value: Any) -> str:
    """-1 steps is the config's "no cap", an internal sentinel: said in words."""
    return "no cap" if name == "max_steps" and value <= 0 else str(value)


def export_label(export: Export) -> str:
    return f"#{export.pk} {export.export_format}, {export.row_count} rows, {export.created_at:%Y-%m-%d %H:%M}"


class RunForm(JobRequestForm):
    kind = forms.ChoiceField(choices=RunKind.choices)
    export = forms.ModelChoiceField(
        queryset=Export.objects.none(),
        help_text="Finished exports: bc-pairs for behaviour cloning, rm-pairs or rm-groups for reward "
        "models, step-labels for process reward models.",
    )
    preset = forms.ChoiceField(
        choices=[(name, name) for name in RM_PRESETS],
        required=False,
        help_text="Reward models and process reward models only. paper: the policy's SmolLM2 backbone (for "
        "a GPU); fast: a small MiniLM encoder (for a CPU).",
    )
    base_checkpoint = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        label="Start from",
        help_text="Optional: a registered model to continue from (a BC model can be the backbone of a "
        "paper reward model). An evaluation needs the reward model to evaluate.",
    )
    max_steps = forms.IntegerField(
        required=False, help_text="Caps the optimizer steps (overrides epochs); empty: train the epochs."
    )
    epochs = forms.FloatField(required=False)
    batch_size = forms.IntegerField(required=False)
    learning_rate = forms.FloatField(required=False)
    max_length = forms.IntegerField(required=False, help_text="Tokens per sequence.")
    lora_rank = forms.IntegerField(
        required=False, help_text="0 trains every weight; at most the model's width (hidden size)."
    )
    validation_fraction = forms.FloatField(required=False, help_text="Of the questions, held out.")
    labels = forms.ChoiceField(
        required=False,
        choices=[("", "—"), *((code, code) for code in PRM_LABELS)],
        help_text="Process reward models only: learn from the step ratings, the step preferences, or both "
        "(default both).",
    )
    eval_every = forms.IntegerField(required=False, help_text="Optimizer steps between validations.")
    checkpoint_every = forms.IntegerField(
        required=False,
        help_text="Optimizer steps between checkpoints a failed run continues from; 0: only at validations.",
    )
    processes = forms.IntegerField(
        required=False,
        help_text="Data-parallel processes on the worker (one GPU each, or a share of its CPU cores); each "
        "takes a batch of this size, so the run learns from batch size x processes examples a step.",
    )
    resume_attempts = forms.IntegerField(
        required=False,
        help_text="Times the run continues from its checkpoint by itself when its worker dies; 0: it fails "
        "(it can still be resumed from its page).",
    )

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        formats = {f for kind_formats in FORMATS.values() for f in kind_formats}
        exports = Export.objects.visible_to(user).filter(status=ExportStatus.DONE, export_format__in=formats)
        self.fields["export"].queryset = exports
        self.fields["export"].label_from_instance = export_label
        self.fields["base_checkpoint"].queryset = ModelCheckpoint.objects.visible_to(user)
        self.fields["base_checkpoint"].label_from_instance = checkpoint_label
        self.fields["preset"].initial = default_rm_preset()
        for name in SETTINGS:
            # The range is checked by the service (the same words as the API and the commands); the
            # browser is told it too, to say so before a round trip.
            bound = BOUNDS[name]
            low = 1 if name == "max_steps" else bound.low  # below 1 is the API's "no cap": empty, here
            self.fields[name].widget.attrs.update(min=low, max=bound.high)
            extra = self.fields[name].help_text
            limit = f"at most {bound.high}" if name == "max_steps" else bound.text()
            self.fields[name].help_text = f"{extra} Must be {limit}. {default_text(name)}".strip()

    def run_settings(self) -> dict[str, Any]:
        """The settings that were filled in (blank ones keep the defaults)."""
        if self.cleaned_data["kind"] == RunKind.RM_EVAL:
            return {}  # an evaluation scores with the settings the model was trained with
        chosen = {name: self.cleaned_data[name] for name in SETTINGS if self.cleaned_data[name] is not None}
        if self.cleaned_data.get("labels"):
            chosen["labels"] = self.cleaned_data["labels"]  # refused by the check for other kinds
        return chosen


class CompareForm(forms.Form):
    run = ModelIdsField(
        queryset=TrainingRun.objects.none(),
        error_messages={
            "required": "Select the runs to compare.",
        },
    )

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = TrainingRun.objects.visible_to(user).select_related(
            "export", "base_checkpoint"
        )

    def clean_run(self) -> list[TrainingRun]:
        runs = sorted(self.cleaned_data["run"], key=lambda run: run.pk)
        if len(runs) > MAX_COMPARED:
            raise forms.ValidationError(f"Compare at most {MAX_COMPARED} runs at a time.")
        return runs
