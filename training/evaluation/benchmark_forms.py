"""The "Run a benchmark" form: the Sample answers form's policy and settings (the questions are the
benchmark's eval split, so the question fields go), the benchmark, how many questions, and for TruthfulQA
who judges (an endpoint's model, people, or both). ``benchmark_runs.request_benchmark`` checks every input
for the pages, the API and ``run_experiment`` alike; its refusal lands on the field it names."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from core.permissions import AnyUser
from training.evaluation.benchmark_runs import DEFAULT_LIMIT, BenchmarkRequest
from training.job_forms import checkpoint_label
from training.models import Benchmark, ModelCheckpoint, RunKind
from training.sampling.forms import SamplingForm

QUESTION_FIELDS = ("batch", "split", "dataset", "limit", "at_states", "step_model", "guide_k")


class BenchmarkForm(SamplingForm):
    benchmark = forms.ChoiceField(
        choices=Benchmark.choices,
        help_text="TriviaQA: exact match and F1 against the answers' aliases. TruthfulQA: truthful and "
        "informative, by a judge and/or people. Either way the dataset's eval questions.",
    )
    questions = forms.IntegerField(
        initial=DEFAULT_LIMIT, min_value=1, max_value=10_000, help_text="The first eval questions, by id."
    )
    judge_endpoint = forms.ChoiceField(
        choices=(),
        required=False,
        label="TruthfulQA judge",
        help_text="A language model behind an endpoint rates each answer truthful? informative? (asked in "
        "both orders; the verdict counts when both agree).",
    )
    judge_reward_model = forms.ModelChoiceField(
        queryset=ModelCheckpoint.objects.none(),
        required=False,
        label="or a reward-model judge",
        empty_label="No reward-model judge",
        help_text="TruthfulQA: a reward model trained on its reference judgements; truthful when its score "
        "clears a threshold calibrated on these questions' reference answers (it cannot judge informative).",
    )
    people = forms.BooleanField(
        required=False,
        label="Also by people",
        help_text="TruthfulQA: the answers' rating batch is opened to labelers; their rates appear beside "
        "the judge's as they rate.",
    )

    field_order = ("benchmark", "questions", "judge_endpoint", "judge_reward_model", "people")

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, user=user, **kwargs)
        for name in QUESTION_FIELDS:
            self.fields.pop(name, None)
        endpoints = [(name, name) for name in settings.SAMPLING_ENDPOINTS]
        self.fields["judge_endpoint"].choices = [("", "No model judge"), *endpoints]
        judges = ModelCheckpoint.objects.visible_to(user).filter(kind=RunKind.RM)
        self.fields["judge_reward_model"].queryset = judges
        self.fields["judge_reward_model"].label_from_instance = checkpoint_label

    def benchmark_request(self) -> BenchmarkRequest:
        data = self.cleaned_data
        return BenchmarkRequest(
            benchmark=data["benchmark"],
            sampling=self.sampling_request(),
            limit=data["questions"],
            judge_endpoint=data["judge_endpoint"],
            judge_reward_model=data["judge_reward_model"],
            people=data["people"],
        )
