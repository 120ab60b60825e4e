"""Researcher pages for sampling runs: the runs, "Sample answers" (a new run), and a run's live progress,
results and samples, each sample's trajectory one click away (the episode page). Runs are jobs on the
``sampling`` queue; these pages only read their rows and ask training.sampling.runs to start or cancel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.demo import DEMO_BATCH_DATASET
from annotation.models import Question
from core.charts import UNIT
from core.permissions import AnyUser, Role, get_visible_or_404, role_required
from core.plot import DOTTED, Series, line_chart
from training.job_views import PAGE_SIZE, announce_request, cancel_unless_finished, shown
from training.models import ModelCheckpoint, RunKind, Sample, SamplingRun
from training.sampling.forms import SamplingForm
from training.sampling.runs import PROMPTED_DEFAULT, cancel_sampling, request_sampling

# Settings shown with a run, in this order.
SHOWN_SETTINGS = (
    "temperature",
    "max_actions",
    "max_answer_tokens",
    "max_command_tokens",
    "seed",
    "examples",
    "constrain_commands",
    "decline_threshold",
)
THRESHOLD_STEPS = 40  # points of the coverage curve
# While a run works its page is fetched every 2 s: it shows the questions stored last, not every sample.
LATEST_WHILE_RUNNING = 5


# A first run that finishes within minutes on a 2-core CPU: best-of-2 on 4 questions, 10 actions each.
QUICK_START = {"n": 2, "limit": 4, "max_actions": 10}


def quick_start(user: AnyUser) -> dict[str, Any]:
    """The Sample answers form's prefill for a small first run: the demo questions when they are loaded,
    scored by the newest reward model this user can see (the demo trains one)."""
    reward_model, demo = demo_choices(user)
    query: dict[str, Any] = dict(QUICK_START) | demo
    return {"query": urlencode(query), "reward_model": reward_model, "dataset": query.get("dataset")}


def demo_choices(user: AnyUser) -> tuple[ModelCheckpoint | None, dict[str, Any]]:
    """What a quick start picks (sampling's and RL's): the demo questions when they are loaded and the
    newest reward model this user can see (the demo trains one); the model, and both as form values."""
    values: dict[str, Any] = {}
    if Question.objects.filter(dataset=DEMO_BATCH_DATASET).exists():
        values["dataset"] = DEMO_BATCH_DATASET
    reward_model = ModelCheckpoint.objects.visible_to(user).filter(kind=RunKind.RM).order_by("-pk").first()
    if reward_model is not None:
        values["reward_model"] = reward_model.pk
    return reward_model, values


@require_GET
@role_required(Role.RESEARCHER)
def sampling_list(request: HttpRequest) -> HttpResponse:
    # Logs grow with every chunk and the scores with every question: a list needs neither.
    runs = SamplingRun.objects.select_related("owner", "policy").defer("log", "metrics", "question_ids")
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "quick_start": quick_start(request.user)}
    return render(request, "training/sampling_runs.html", context)


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def sampling_new(request: HttpRequest) -> HttpResponse:
    initial = SamplingForm.prefill(request.GET, request.user)
    form = SamplingForm(request.POST or None, user=request.user, initial=initial)
    run = None
    if request.method == "POST" and form.is_valid():
        run = form.start(lambda: request_sampling(request.user, form.sampling_request()))
    if run is not None:
        announce_request(request, run, "Sampling run")
        return redirect("training:sampling_run", pk=run.pk)
    status = 400 if form.errors else 200
    return render(request, "training/sampling_new.html", {"form": form}, status=status)


@dataclass(frozen=True)
class QuestionSamples:
    question: Question
    samples: list[Sample]

    @property
    def declined(self) -> bool:
        return any(sample.declined for sample in self.samples)

    @property
    def answered(self) -> bool:
        return any(sample.chosen for sample in self.samples)


@require_GET
@login_required  # visibility decides: for anyone but researchers a run does not exist (404)
@vary_on_headers("HX-Request")
def sampling_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(
        SamplingRun.objects.select_related("owner", "policy", "reward_model"), request.user, pk=pk
    )
    metrics = run.metrics or {}
    stored = Sample.objects.filter(run=run).values("question").distinct().count()
    context = {
        "run": run,
        "metrics": metrics,
        "invalid_rate": shown(metrics.get("invalid_action_rate")),
        "valid_rate": shown(1 - metrics["invalid_action_rate"]) if "invalid_action_rate" in metrics else "",
        "constraint_rows": constraint_rows(metrics),
        "arm_rows": arm_rows(metrics),
        "chart": coverage_chart(run),
        # Every sample once the run has finished (the last poll stops polling); while it works, the
        # questions stored last, each as soon as its n episodes have ended.
        "groups": question_groups(run, latest=None if run.is_finished else LATEST_WHILE_RUNNING),
        "stored_questions": stored,
        "prompted_default": run.policy_name == PROMPTED_DEFAULT,
    }
    if request.htmx:
        return render(request, "training/_sampling_status.html", context)
    context["settings"] = [
        (name, setting_text(name, run.settings[name])) for name in SHOWN_SETTINGS if name in run.settings
    ]
    context["source"] = [(name, shown(value)) for name, value in (run.question_source or {}).items()]
    return render(request, "training/sampling_detail.html", context)


def arm_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """A guided run's two halves as the page shows them (none for an unguided run)."""
    rows = []
    for name, label in (("unguided", "Unguided"), ("guided", "Guided by the step model")):
        arm = (metrics.get("arms") or {}).get(name)
        if arm:
            rows.append(
                {
                    "label": label,
                    "episodes": arm["episodes"],
                    "valid": "—" if arm["valid_action_rate"] is None else f"{arm['valid_action_rate']:.1%}",
                    "step": "—" if arm["mean_step_score"] is None else f"{arm['mean_step_score']:.3f}",
                    "answer": "—" if arm["mean_answer_score"] is None else f"{arm['mean_answer_score']:.3f}",
                    "scored": arm["scored_answers"],
                }
            )
    return rows


@dataclass(frozen=True)
class ConstraintRow:
    """The actions whose requests carried one kind of constraint, and how many of them were valid."""

    kind: str
    actions: int
    valid: int

    @property
    def valid_rate(self) -> str:
        return shown(self.valid / self.actions) if self.actions else "—"


def constraint_rows(metrics: dict[str, Any]) -> list[ConstraintRow]:
    """The run's actions by the constraint their requests carried (runs from before it was counted: none)."""
    counts = metrics.get("constraints")
    if not isinstance(counts, dict):
        return []
    return [
        ConstraintRow(str(kind), int(row.get("actions", 0)), int(row.get("valid", 0)))
        for kind, row in counts.items()
        if isinstance(row, dict)
    ]


def setting_text(name: str, value: Any) -> str:
    if name == "constrain_commands":
        return {None: "policy default", True: "on", False: "off"}.get(value, shown(value))
    if name == "decline_threshold" and value is None:
        return "none"
    return shown(value)


def question_groups(run: SamplingRun, latest: int | None = None) -> list[QuestionSamples]:
    """The run's samples (of the ``latest`` questions stored, if given), grouped by question in the run's
    order; each episode with its answer and state (its quotes), its actions counted on the Sample row."""
    samples = Sample.objects.filter(run=run)
    if latest is not None:
        newest = samples.order_by("-pk").values_list("question_id", flat=True)[: latest * run.n]
        samples = samples.filter(question_id__in=list(dict.fromkeys(newest))[:latest])
    samples = samples.select_related("question", "episode").order_by("question", "index")
    groups: dict[int, QuestionSamples] = {}
    for sample in samples:
        groups.setdefault(sample.question_id, QuestionSamples(sample.question, [])).samples.append(sample)
    order = {pk: i for i, pk in enumerate(run.question_ids)}
    return sorted(groups.values(), key=lambda group: order.get(group.question.pk, len(order)))


def coverage_curve(
    best_scores: Sequence[float | None], thresholds: Sequence[float]
) -> list[tuple[float, float]]:
    """training.sampling.best_of_n.coverage_curve, which this mirrors, imports torch with its module, and
    the web app never loads torch: (threshold, share of questions whose best score is at least it)."""
    total = len(best_scores)
    present = [s for s in best_scores if s is not None]
    return [(t, sum(s >= t for s in present) / total if total else 0.0) for t in sorted(thresholds)]


def coverage_chart(run: SamplingRun) -> str:
    """Coverage (share of questions answered) against a decline threshold swept over the scores seen."""
    scores = [s for s in (run.metrics or {}).get("best_scores", []) if isinstance(s, int | float)]
    if not scores:
        return ""
    low, high = min(scores), max(scores)
    margin = (high - low) * 0.05 or 0.5
    low, high = low - margin, high + margin
    thresholds = [low + (high - low) * i / THRESHOLD_STEPS for i in range(THRESHOLD_STEPS + 1)]
    points = coverage_curve(run.metrics["best_scores"], thresholds)
    series = [Series("questions answered at this threshold", points)]
    threshold = run.settings.get("decline_threshold")
    if isinstance(threshold, int | float):
        series.append(Series("this run's threshold", [(threshold, 0.0), (threshold, 1.0)], 1, DOTTED))
    title = f"Sampling run {run.pk}: coverage against the decline threshold"
    return line_chart(
        series, title, left_label="share answered", x_label="decline threshold", left_bounds=UNIT
    )


@require_POST
@login_required
def sampling_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(SamplingRun.objects, request.user, pk=pk)
    cancel_unless_finished(request, run, "Sampling run", cancel_sampling)
    return redirect("training:sampling_run", pk=run.pk)
