"""Researcher pages of RL runs: the new-run form, and what an RL run's page shows beside every run's status
(training.runs.views.run_detail): its lineage, a chart per quantity with its numbers, and the latest step's
episodes with their rewards; every step's episodes as a JSON-lines download. Runs are jobs on the
``training`` queue; these pages only read their rows and ask training.rl.runs to start one."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods

from core.charts import UNIT
from core.permissions import AnyUser, Role, get_visible_or_404, role_required
from core.plot import DOTTED, Series, line_chart, timeline_points
from training.job_views import announce_request, shown
from training.models import TrainingRun
from training.rl.episodes import episode_records
from training.rl.forms import RLRunForm
from training.rl.runs import request_rl_run
from training.runs.config import SMOLLM2
from training.sampling.runs import PROMPTED_DEFAULT
from training.sampling.views import demo_choices

# What each step logs and is drawn as: logged key, title, y-axis label, a known range.
QUANTITIES = (
    ("reward_mean", "Mean reward", "reward (minus the RM's offset)", None),
    ("kl", "KL from the starting policy", "nats per episode", None),
    ("entropy", "Entropy", "nats per token", None),
    ("answer_tokens", "Answer length", "tokens", None),
    ("valid_actions", "Share of valid actions", "share", UNIT),
)
# The settings shown with a run (the rest rarely change).
SHOWN_SETTINGS = (
    "episodes", "answers_per_browse", "steps", "questions_per_step", "group_size", "learning_rate",
    "kl_coef", "kl_budget", "clip_epsilon", "temperature", "max_answer_tokens", "max_actions", "seed",
    "search", "corpus",
)  # fmt: skip


# A first run that ends within 10 minutes on a 2-core CPU with the demo (measured: README): every reference
# of the FreshWiki demo's rl questions each step (8 prompts x 4 answers: the same prompts every step, so the
# curve follows the policy, not which prompts a step drew), a learning rate at which 8 steps move the
# reward, and a KL budget.
QUICK_START = {
    "steps": 8,
    "questions_per_step": 8,
    "group_size": 4,
    "learning_rate": 5e-5,
    "max_answer_tokens": 48,
    "kl_budget": 12.0,
}


def quick_start(user: AnyUser) -> dict[str, Any]:
    """The form's prefill for the quick start: the settings above, the demo questions when loaded, and the
    newest reward model this user can see."""
    return dict(QUICK_START) | demo_choices(user)[1]


@require_http_methods(["GET", "POST"])
@role_required(Role.RESEARCHER)
def rl_new(request: HttpRequest) -> HttpResponse:
    initial = quick_start(request.user) if "quick_start" in request.GET else {}
    form = RLRunForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        run = form.start(lambda: request_rl_run(request.user, form.rl_request()))
        if run is not None:
            announce_request(request, run, "RL run")
            return redirect("training:run", pk=run.pk)
    status = 400 if form.errors else 200
    return render(request, "training/rl_new.html", {"form": form}, status=status)


@require_GET
@login_required  # visibility decides: for anyone but researchers a run does not exist (404)
def rl_episodes_jsonl(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """Every episode of every step so far, a JSON object a line (as ``GET /api/training-runs/<id>/episodes``
    gives each), streamed: a long run has many (empty for other kinds of run)."""
    run = get_visible_or_404(TrainingRun.objects, request.user, pk=pk)
    lines = _json_lines(episode_records(run))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="rl-run-{run.pk}-episodes.jsonl"'
    return response


def _json_lines(records: Iterator[dict[str, Any]]) -> Iterator[str]:
    for record in records:
        yield json.dumps(record, ensure_ascii=False) + "\n"


def rl_context(run: TrainingRun) -> dict[str, Any]:
    """What an RL run's page adds: the charts with their numbers, the latest samples, its lineage."""
    return {
        "rl_charts": rl_charts(run),
        "rl_samples": run.samples or [],
        "rl_settings": [(name, shown(run.config.get(name))) for name in SHOWN_SETTINGS if name in run.config],
        "rl_source": question_source(run),
        "rl_flat_reward": flat_reward(run),
        "default_policy": PROMPTED_DEFAULT,
        "default_policy_model": SMOLLM2,
    }


# Rewards are logits of preference (WebGPT: a difference of d means the better answer is preferred with
# probability sigmoid(d)). Answers a step's rewards spread by less than this are preferred to each other at
# most ~51% of the time: the reward model hardly tells them apart, and a policy trained on that spread
# follows its noise and quirks more than any preference (the advantages are scaled up to it by default).
FLAT_REWARD_SPREAD = 0.04


def flat_reward(run: TrainingRun) -> dict[str, float] | None:
    """The latest step's reward spread and the preference it stands for, when under FLAT_REWARD_SPREAD."""
    steps = [entry for entry in run.timeline or [] if "reward_std" in entry]
    if not steps or steps[-1]["reward_std"] >= FLAT_REWARD_SPREAD:
        return None
    spread = float(steps[-1]["reward_std"])
    return {"spread": spread, "preference": 1 / (1 + math.exp(-spread))}


def rl_charts(run: TrainingRun) -> list[dict[str, Any]]:
    """One chart per quantity the steps logged (valid actions: browsing runs only), each with its first
    and latest value; KL with its budget as a dotted line when one is set."""
    charts = []
    budget = run.config.get("kl_budget") or 0
    for key, title, y_label, bounds in QUANTITIES:
        points = timeline_points(run.timeline or [], key)
        if not points:
            continue
        series = [Series(title, points)]
        if key == "kl" and budget > 0:
            edges = [(points[0][0], float(budget)), (points[-1][0], float(budget))]
            series.append(Series("KL budget", edges, 1, DOTTED))
        chart: SafeString = line_chart(series, f"Run {run.pk}: {title.lower()}", y_label, left_bounds=bounds)
        charts.append({"title": title, "chart": chart, "first": points[0], "latest": points[-1]})
    return charts


def question_source(run: TrainingRun) -> str:
    """How the run's questions were chosen, in words."""
    source = run.question_source or {}
    count = len(run.question_ids or [])
    if source.get("ids"):
        return f"{count} question(s) of the rl split, chosen by id"
    parts = [f"batch {source['batch']}" if source.get("batch") else ""]
    parts.append(f"dataset {source['dataset']}" if source.get("dataset") else "")
    chosen = ", ".join(part for part in parts if part)
    return f"{count} question(s) of the rl split" + (f" ({chosen})" if chosen else "")
