"""Researcher pages for training: the runs (compared side by side), a new run, a run's live progress and
results, and the model registry. Runs are jobs on the ``training`` queue; these pages only read their rows
and ask training.runs.jobs to start, cancel or delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.models import Export
from core.inputs import parse_id
from core.permissions import Role, get_visible_or_404, role_required
from core.plot import line_chart, timeline_series
from training.checkpoints import resumable_step
from training.errors import RunError
from training.job_views import PAGE_SIZE, announce_request, cancel_unless_finished, key_metrics, shown
from training.models import ModelCheckpoint, RunKind, RunStatus, TrainingRun, relative_to_store
from training.rl.views import rl_context
from training.runs.forms import CompareForm, RunForm
from training.runs.inputs import FORMATS
from training.runs.jobs import cancel_run, checkpoint_users, delete_checkpoint, request_run, resume_run

# Settings shown with a run and compared between runs (the rest rarely change).
SHOWN_SETTINGS = (
    "base_model",
    "learning_rate",
    "batch_size",
    "gradient_accumulation",
    "max_length",
    "epochs",
    "max_steps",
    "lora_rank",
    "validation_fraction",
    "eval_every",
    "seed",
    "processes",
    "checkpoint_every",
    "resume_attempts",
)


def setting_shown(run: TrainingRun, name: str) -> str:
    """A run's setting in a person's words: the registered model it started from by name (its config holds
    the folder the worker read, a path on the server), and no step cap as what it means."""
    value = run.config.get(name)
    if name == "base_model" and run.base_checkpoint is not None:
        return f"{run.base_checkpoint.name} (registered model)"
    if name == "base_model" and isinstance(value, str) and Path(value).is_absolute():
        # A folder outside the store: its name, not the server's layout.
        return relative_to_store(value) or Path(value).name
    if name == "max_steps" and isinstance(value, int) and value <= 0:
        return "no cap (the epochs decide)"
    return shown(value)


@require_GET
@role_required(Role.RESEARCHER)
def run_list(request: HttpRequest) -> HttpResponse:
    # Timelines and logs grow with every step: a list of fifty runs needs neither.
    runs = TrainingRun.objects.select_related("owner", "export", "base_checkpoint").defer("timeline", "log")
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(run, key_metrics(run)) for run in page]
    return render(request, "training/runs.html", {"page": page, "rows": rows})


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def run_new(request: HttpRequest) -> HttpResponse:
    form = RunForm(request.POST or None, user=request.user, initial=_preselected(request))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        run = form.start(
            lambda: request_run(
                request.user,
                data["kind"],
                data["export"],
                form.run_settings(),
                preset=data["preset"],
                base_checkpoint=data["base_checkpoint"],
            )
        )
        if run is not None:
            announce_request(request, run, "Run")
            return redirect("training:run", pk=run.pk)
    status = 400 if form.errors else 200
    return render(request, "training/run_new.html", {"form": form}, status=status)


def _preselected(request: HttpRequest) -> dict[str, Any]:
    """?export=ID&kind=...&base=ID from an export's "Train" link or a round's "Retrain"; no kind: the one
    the export's format is for."""
    initial: dict[str, Any] = {}
    export = Export.objects.visible_to(request.user).filter(pk=parse_id(request.GET.get("export"))).first()
    if export is not None:
        initial["export"] = export.pk
        initial["kind"] = next(
            (kind for kind, formats in FORMATS.items() if export.export_format in formats), ""
        )
    if request.GET.get("kind") in RunKind.values:
        initial["kind"] = request.GET["kind"]
    # ?base=ID from a round's "Retrain the reward model": start from the reward model the round used.
    base = (
        ModelCheckpoint.objects.visible_to(request.user).filter(pk=parse_id(request.GET.get("base"))).first()
    )
    if base is not None:
        initial["base_checkpoint"] = base.pk
    return initial


@require_GET
@login_required  # visibility decides: for anyone but researchers a run does not exist (404)
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(
        TrainingRun.objects.select_related("owner", "export", "base_checkpoint", "reward_model"),
        request.user,
        pk=pk,
    )
    context = {
        "run": run,
        "metrics": key_metrics(run),
        "checkpoint": ModelCheckpoint.objects.filter(run=run).first(),
        "other_metrics": _other_metrics(run),
    }
    if run.kind == RunKind.RL:  # no losses: rewards, KL, samples (training.rl.views)
        context |= rl_context(run) | {"settings": []}
    else:
        title = f"Run {run.pk}: losses and validation accuracy"
        context["chart"] = line_chart(timeline_series(run.timeline), title)
        context["settings"] = [
            (name, setting_shown(run, name)) for name in SHOWN_SETTINGS if name in run.config
        ]
    if run.status == RunStatus.FAILED:
        context["resumable_step"] = resumable_step(run.pk)
    template = "training/_run_status.html" if request.htmx else "training/run_detail.html"
    return render(request, template, context)


def _other_metrics(run: TrainingRun) -> list[tuple[str, str]]:
    """Every final number not among the key metrics (counts, reward offset, runtime)."""
    key = {"train_loss", "eval_loss", "eval_accuracy", "eval_accuracy_low", "eval_accuracy_high"}
    key |= {"accuracy", "accuracy_ci95", "log_loss", "calibration"}
    return [(name, shown(value)) for name, value in sorted((run.metrics or {}).items()) if name not in key]


@require_POST
@login_required
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(TrainingRun.objects, request.user, pk=pk)
    cancel_unless_finished(request, run, "Run", cancel_run)
    return redirect("training:run", pk=run.pk)


@require_POST
@login_required
def run_resume(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(TrainingRun.objects, request.user, pk=pk)
    try:
        step = resume_run(request.user, run)
    except RunError as exc:
        messages.error(request, f"Run {run.pk}: {exc.reason}.")
    else:
        messages.info(request, f"Run {run.pk} queued again: it continues from its checkpoint of step {step}.")
    return redirect("training:run", pk=run.pk)


@require_GET
@role_required(Role.RESEARCHER)
def run_compare(request: HttpRequest) -> HttpResponse:
    form = CompareForm(request.GET, user=request.user)
    if not form.is_valid():
        return render(request, "training/compare.html", {"form": form}, status=400)
    runs = form.cleaned_data["run"]
    series = [s for i, run in enumerate(runs) for s in timeline_series(run.timeline, f"#{run.pk} ", colour=i)]
    context = {
        "form": form,
        "runs": runs,
        "chart": line_chart(
            series, "Losses and validation accuracy of runs " + ", ".join(f"#{r.pk}" for r in runs)
        ),
        "rows": _comparison_rows(runs),
    }
    return render(request, "training/compare.html", context)


def _comparison_rows(runs: list[TrainingRun]) -> list[tuple[str, list[str]]]:
    """One row per fact, setting or final metric; one column per run."""
    summaries = [key_metrics(run) for run in runs]
    rows = [
        ("kind", [run.get_kind_display() for run in runs]),
        ("export", [f"#{run.export_id} {run.export.export_format}" if run.export else "—" for run in runs]),
        ("preset", [shown(run.preset) for run in runs]),
        ("started from", [shown(run.base_checkpoint and run.base_checkpoint.name) for run in runs]),
        ("status", [run.get_status_display() for run in runs]),
        ("steps", [f"{run.step} / {run.total_steps}" for run in runs]),
        ("train loss", [shown(m["train_loss"]) for m in summaries]),
        ("validation loss", [shown(m["eval_loss"]) for m in summaries]),
        ("accuracy", [shown(m["accuracy"]) for m in summaries]),
        (
            "accuracy 95% CI",
            [f"{shown(m['low'])} to {shown(m['high'])}" if m["low"] is not None else "—" for m in summaries],
        ),
    ]
    rows += [(name, [shown(run.config.get(name)) for run in runs]) for name in SHOWN_SETTINGS]
    others = sorted({name for run in runs for name, _ in _other_metrics(run)})
    rows += [(name, [shown((run.metrics or {}).get(name)) for run in runs]) for name in others]
    return rows


@require_GET
@role_required(Role.RESEARCHER)
def model_list(request: HttpRequest) -> HttpResponse:
    # An RL model's lineage is on its run's row; the run's curves, log and samples are not needed here.
    checkpoints = ModelCheckpoint.objects.select_related("created_by", "run").defer(
        "run__timeline", "run__log", "run__samples", "run__config"
    )
    page = Paginator(checkpoints, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "training/models.html", {"page": page})


@require_http_methods(["GET", "POST"])
@login_required
def model_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation; POST deletes the row and its folder in the model store."""
    checkpoint = get_visible_or_404(ModelCheckpoint.objects, request.user, pk=pk)
    users = checkpoint_users(checkpoint)
    if request.method == "POST":
        try:
            delete_checkpoint(request.user, checkpoint)
        except RunError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Deleted {checkpoint.name} and its folder.")
            return redirect("training:models")
    context = {"checkpoint": checkpoint, "users": users}
    return render(
        request, "training/model_delete.html", context, status=409 if request.method == "POST" else 200
    )
