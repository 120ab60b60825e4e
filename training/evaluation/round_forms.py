"""Forms of the round pages: a new round, runs added to one (only those not in it yet), and the data its
reward model is retrained on. What a round may be is checked by ``rounds`` (the API's check too)."""

from __future__ import annotations

from typing import Any

from django import forms

from core.params import ModelIdsField
from training.evaluation.rounds import MAX_NAME, MAX_NOTES
from training.models import Round, SamplingRun


class TitledSelectMultiple(forms.SelectMultiple):
    """A list box whose options carry their label as a tooltip too: a long policy name still reads whole."""

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(*args, **kwargs)
        option["attrs"]["title"] = option["label"]
        return option


def run_label(run: SamplingRun) -> str:
    """Short enough for the list box: the policy, n and the reward model, then the status."""
    scored = f" by {run.reward_model_name}" if run.reward_model_name else ""
    return f"run {run.pk}: {run.policy_name}, best-of-{run.n}{scored}, {run.get_status_display().lower()}"


class RoundForm(forms.Form):
    name = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs={"maxlength": MAX_NAME}),
        help_text='Optional: shown after the number ("round 3: name").',
    )
    sampling_runs = ModelIdsField(
        queryset=SamplingRun.objects.order_by("-pk"),
        widget=TitledSelectMultiple,
        help_text="The runs this turn of the loop sampled (batches, exports and models are found from them)",
        error_messages={"invalid_choice": "There is no sampling run %(value)s."},
    )
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "maxlength": MAX_NOTES}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["sampling_runs"].label_from_instance = run_label


class AddRunsForm(forms.Form):
    """Only the runs not in the round yet are offered (``rounds.add_runs`` refuses the others by name)."""

    sampling_runs = ModelIdsField(
        queryset=SamplingRun.objects.none(),
        label="Add sampling runs",
        widget=TitledSelectMultiple,
        error_messages={
            "invalid_choice": "Sampling run %(value)s does not exist or is in this round already."
        },
    )

    def __init__(self, *args: Any, round_: Round, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["sampling_runs"]
        field.queryset = SamplingRun.objects.exclude(rounds=round_).order_by("-pk")
        field.label_from_instance = run_label


class RetrainForm(forms.Form):
    """Which data to export for retraining: a ``scope:format`` key of ``round_data.retrain_options``, the
    first (the data so far) by default. The page draws the radios itself, each with its counts and
    warnings."""

    choice = forms.ChoiceField(
        widget=forms.RadioSelect, error_messages={"invalid_choice": "This round offers no such data."}
    )

    def __init__(self, *args: Any, options: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["choice"].choices = [(key, key) for key in options]
        self.fields["choice"].initial = options[0]
