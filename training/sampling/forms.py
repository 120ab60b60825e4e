"""The "Sample answers" form: a policy, a reward model, a backend, the settings and the question set of a
sampling run. Ranges are not checked here: ``training.sampling.runs.request_sampling`` checks every input
for the pages, the API and the ``sample_answers`` command alike, and its refusal lands on the field it
names (``add_run_error``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import QueryDict

from annotation.models import DemonstrationBatch, Question, Split
from browser.sources import LOCAL, provider_choices
from core.permissions import AnyUser
from training.job_forms import JobRequestForm, checkpoint_label
from training.models import POLICY_KINDS, ModelCheckpoint, RunKind
from training.sampling.runs import BOUNDS, DEFAULTS, SETTABLE, QuestionSet, SamplingRequest

# The form's settings that go into SamplingRequest.settings (the rest name models and questions).
SETTINGS = (
    "n",
    "temperature",
    "max_actions",
    "max_answer_tokens",
    "max_command_tokens",
    "seed",
    "examples",
    "constrain_commands",
    "decline_threshold",
    "at_states",
)
CONSTRAIN = {"": None, "on": True, "off": False}
PROMPTED_LABEL = "SmolLM2-135M-Instruct, prompted (default)"
# Said where the default is chosen: a newcomer's first run otherwise reads like a broken platform.
POLICY_HELP = (
    "A behaviour-cloned or RL-trained model from the registry, or the prompted instruct model. Expect "
    "nonsense answers from the prompted SmolLM2-135M default: it shows the loop working on a CPU. For "
    "answers worth comparing, choose a BC model trained on demonstrations, or an endpoint of "
    "SAMPLING_ENDPOINTS as the backend."
)


def dataset_choices() -> list[tuple[str, str]]:
    names = Question.objects.order_by("dataset").values_list("dataset", flat=True).distinct()
    return [("", "Any dataset"), *((name, name) for name in names)]


class SamplingForm(JobRequestForm):
    policy = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        empty_label=PROMPTED_LABEL,
        help_text=POLICY_HELP,
    )
    reward_model = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        empty_label="None (unscored: the first answer is kept)",
        help_text="Scores every sample; best-of-n keeps the highest.",
    )
    step_model = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        empty_label="None (unguided)",
        help_text="A process reward model: each question is also sampled n times guided by it, each step "
        "the best of k commands it scores, beside the n unguided samples; the run page compares the two "
        "and best-of-n chooses among the guided.",
    )
    guide_k = forms.IntegerField(
        required=False,
        label="Commands per guided step (k)",
        help_text="With a step model: commands sampled at each guided step (default 4).",
    )
    backend = forms.ChoiceField(
        choices=(),
        help_text="local: this worker's CPU or GPU; an endpoint: an OpenAI-compatible server the "
        "operator configured (it serves its own model: leave the policy empty).",
    )
    search = forms.ChoiceField(
        label="Search with",
        choices=(),
        required=False,
        help_text="The local index of a corpus, or a live-web provider the operator configured.",
    )
    corpus = forms.CharField(
        required=False, max_length=100, help_text="For the local index: the corpus; empty: the default."
    )
    n = forms.IntegerField(label="Samples per question (n)")
    temperature = forms.FloatField()
    max_actions = forms.IntegerField(help_text="Browsing actions per episode before it must answer.")
    max_answer_tokens = forms.IntegerField()
    max_command_tokens = forms.IntegerField(help_text="The longest command a policy may write, in tokens.")
    seed = forms.IntegerField(help_text="The same seed gives the same samples.")
    constrain_commands = forms.ChoiceField(
        choices=[("", "Policy default (on for prompted models)"), ("on", "On"), ("off", "Off")],
        required=False,
        help_text="Only commands valid on the current page can be sampled.",
    )
    decline_threshold = forms.FloatField(
        required=False,
        help_text="Optional: a best score below it declines to answer (0 = the average demonstration).",
    )
    at_states = forms.BooleanField(
        required=False,
        label="At demonstration states",
        help_text="Instead of browsing: the policy's next action at three states of each finished human "
        "demonstration of the questions (n, reward and step models do not apply), for step preferences of "
        "the demonstrator's action against the policy's.",
    )
    examples = forms.IntegerField(
        label="Few-shot examples", help_text="Demonstrations shown to a prompted policy as examples."
    )
    batch = forms.ModelChoiceField(
        queryset=DemonstrationBatch.objects.all(),
        required=False,
        label="Demonstration batch",
        empty_label="Any batch",
    )
    split = forms.ChoiceField(choices=[("", "Any split"), *Split.choices], required=False)
    dataset = forms.ChoiceField(choices=(), required=False)
    limit = forms.IntegerField(help_text="The first questions (by id) of those chosen above.")

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        defaults = {name: DEFAULTS.get(name) for name in (*SETTINGS, "limit")} | {
            "backend": "local",
            "search": LOCAL,
        }
        kwargs["initial"] = defaults | kwargs.get("initial", {})
        super().__init__(*args, **kwargs)
        for name in SETTINGS:
            if name not in SETTABLE:  # offered only where the service takes it
                del self.fields[name]
        models = ModelCheckpoint.objects.visible_to(user)
        self.fields["policy"].queryset = models.filter(kind__in=POLICY_KINDS)
        self.fields["reward_model"].queryset = models.filter(kind=RunKind.RM)
        self.fields["step_model"].queryset = models.filter(kind=RunKind.PRM)
        for name in ("policy", "reward_model", "step_model"):
            self.fields[name].label_from_instance = checkpoint_label
        self.fields["backend"].choices = [("local", "local"), *((n, n) for n in settings.SAMPLING_ENDPOINTS)]
        self.fields["dataset"].choices = dataset_choices()
        self.fields["search"].choices = provider_choices()
        for name, (low, high) in BOUNDS.items():
            # The browser is told the range, to say so before a round trip; the service decides.
            if name in self.fields:
                self.fields[name].widget.attrs.update(min=low, max=high)
        self.fields["temperature"].widget.attrs["step"] = "any"
        self.fields["decline_threshold"].widget.attrs["step"] = "any"

    @classmethod
    def prefill(cls, query: QueryDict, user: AnyUser) -> dict[str, Any]:
        """Initial values from a link (``?reward_model=3&dataset=demo&n=2``): each value its field accepts;
        anything else is left at the default, never an error."""
        fields = cls(user=user).fields
        initial: dict[str, Any] = {}
        for name, field in fields.items():
            raw = query.get(name)
            if raw is None:
                continue
            try:
                value = field.clean(raw)
            except ValidationError:
                continue
            initial[name] = value.pk if isinstance(value, ModelCheckpoint | DemonstrationBatch) else value
        return initial

    def sampling_request(self) -> SamplingRequest:
        """The request from the form (a subclass without the step-model or question fields, the
        benchmark form, leaves them at their defaults)."""
        data = self.cleaned_data
        values = {name: data[name] for name in SETTINGS if name in self.fields}
        values["constrain_commands"] = CONSTRAIN[data["constrain_commands"]]
        if data.get("guide_k") is not None:
            values["guide_k"] = data["guide_k"]  # refused by the check without a step model
        return SamplingRequest(
            policy=data["policy"],
            reward_model=data["reward_model"],
            step_model=data.get("step_model"),
            backend=data["backend"],
            search=data["search"] or LOCAL,
            corpus=data["corpus"].strip(),
            questions=QuestionSet(
                batch=data.get("batch"),
                split=data.get("split", ""),
                dataset=data.get("dataset", ""),
                limit=data.get("limit", DEFAULTS["limit"]),
            ),
            settings=values,
        )
