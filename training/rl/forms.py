"""The new-RL-run form: the starting policy, the reward model, the questions (of the rl split) and the main
settings. Ranges are not checked here: ``training.rl.inputs.check_rl`` checks every input for the page,
the API and the ``train_rl`` command alike, and its refusal lands on the field it names."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from django import forms

from annotation.models import DemonstrationBatch
from browser.sources import LOCAL, provider_choices
from core.permissions import AnyUser
from training.job_forms import JobRequestForm, checkpoint_label
from training.models import ModelCheckpoint, RunKind
from training.rl.config import EPISODE_KINDS, RL_BOUNDS, RLConfig
from training.rl.inputs import START_KINDS, RLRequest
from training.sampling.forms import PROMPTED_LABEL, dataset_choices
from training.sampling.runs import DEFAULTS, QuestionSet

# The settings offered on the form; the rest keep the defaults of training.rl.config.
SETTINGS = (
    "episodes",
    "answers_per_browse",
    "steps",
    "questions_per_step",
    "group_size",
    "learning_rate",
    "kl_coef",
    "kl_budget",
    "temperature",
    "max_answer_tokens",
    "max_actions",
    "seed",
    "checkpoint_every",
    "processes",
    "resume_attempts",
)
HELP = {
    "episodes": "answer: the policy answers from the quotes of a finished episode or answer (cheap); "
    "browse: it browses the text environment, then answers.",
    "answers_per_browse": "Browse only: answer-only episodes on each browsing episode's quotes (paper: 15).",
    "steps": "Optimizer steps.",
    "questions_per_step": "Prompts (answer) or questions (browse) per step.",
    "group_size": "Episodes per prompt: the advantage is an episode's reward minus its group's mean.",
    "kl_coef": "The per-token KL penalty to the starting policy (paper: 0.02).",
    "kl_budget": "Stop once the mean KL per episode (nats) exceeds it; 0: no budget.",
    "max_actions": "Browse only: actions per episode before it must answer.",
    "checkpoint_every": "Steps between checkpoints a failed run continues from; 0: none.",
    "processes": "Processes on the worker sharing each step's questions (one GPU each, or a share of the "
    "CPU cores); at most the questions per step.",
    "resume_attempts": "Times the run continues from its checkpoint by itself when its worker dies; 0: it "
    "fails (it can still be resumed from its page).",
}

LABELS = {"kl_coef": "KL coefficient", "kl_budget": "KL budget"}
# How the worker runs it, rather than what it learns: blank keeps the default.
OPTIONAL = frozenset({"checkpoint_every", "processes", "resume_attempts"})


class RLRunForm(JobRequestForm):
    base_checkpoint = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        label="Starting policy",
        empty_label=PROMPTED_LABEL,
        help_text="A BC model, or an earlier RL run's policy; the KL penalty keeps the policy near it.",
    )
    reward_model = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(), help_text="The reward model the policy is trained against."
    )
    batch = forms.ModelChoiceField(
        queryset=DemonstrationBatch.objects.all(),
        required=False,
        label="Demonstration batch",
        empty_label="Any batch",
    )
    dataset = forms.ChoiceField(choices=(), required=False)
    limit = forms.IntegerField(
        help_text="The first questions (by id) of the rl split, of those chosen above."
    )
    search = forms.ChoiceField(label="Search with", choices=(), required=False, help_text="Browse only.")
    corpus = forms.CharField(
        required=False, max_length=100, help_text="Browse only, local index: the corpus; empty: the default."
    )
    episodes = forms.ChoiceField(choices=[(kind, kind) for kind in EPISODE_KINDS])

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        defaults = RLConfig()
        initial = {name: getattr(defaults, name) for name in SETTINGS}
        kwargs["initial"] = (
            initial | {"limit": DEFAULTS["limit"], "search": LOCAL} | kwargs.get("initial", {})
        )
        super().__init__(*args, **kwargs)
        types = {f.name: type(getattr(defaults, f.name)) for f in fields(RLConfig)}
        for name in SETTINGS[1:]:
            field_type = forms.FloatField if types[name] is float else forms.IntegerField
            bound = RL_BOUNDS[name]
            self.fields[name] = field_type(
                required=name not in OPTIONAL,
                label=LABELS.get(name),
                help_text=f"{HELP.get(name, '')} Must be {bound.text()}.".strip(),
                widget=forms.NumberInput(
                    attrs={"min": bound.low, "max": bound.high, "step": "any" if types[name] is float else 1}
                ),
            )
        self.fields["episodes"].help_text = HELP["episodes"]
        models = ModelCheckpoint.objects.visible_to(user)
        self.fields["base_checkpoint"].queryset = models.filter(kind__in=START_KINDS)
        self.fields["reward_model"].queryset = models.filter(kind=RunKind.RM)
        for name in ("base_checkpoint", "reward_model"):
            self.fields[name].label_from_instance = checkpoint_label
        self.fields["dataset"].choices = dataset_choices()
        self.fields["search"].choices = provider_choices()

    def rl_request(self) -> RLRequest:
        data = self.cleaned_data
        return RLRequest(
            reward_model=data["reward_model"],
            base=data["base_checkpoint"],
            questions=QuestionSet(batch=data["batch"], dataset=data["dataset"], limit=data["limit"]),
            search=data["search"] or LOCAL,
            corpus=data["corpus"].strip(),
            settings={name: data[name] for name in SETTINGS if data[name] is not None},
        )
