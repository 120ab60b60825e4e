"""The demo's reward model, queued by ``load_demo`` for the training worker."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.exports.rules import clean_export_request
from annotation.exports.service import export_now
from annotation.models import ExportFormat, Split
from training.models import RunKind, RunStatus, TrainingRun
from training.runs.jobs import request_run

# The demo's reward model: trained by the training worker from the TruthfulQA reference comparisons of
# the rm split (the demo's only judgements when `make run` first starts), with the fast preset (MiniLM)
# and few steps, so that it is in the model registry a minute or two after `make run` and the demo's
# best-of-n samples can be scored. The first line of its run's log names it; a later load_demo finds it
# there and queues no second one (unless the first failed or was cancelled).
DEMO_RM_LOG = "Demo reward model (queued by load_demo): fast preset, TruthfulQA reference comparisons\n"
DEMO_RM_PRESET = "fast"
# 20 steps of 8 pairs, TruthfulQA's short prompts cut at 128 tokens, one validation at the end. Measured: 90 s
# of CPU time, 188 s of wall while other jobs loaded both cores (so about 45-50 s alone on 2 cores); a
# higher learning rate than the preset's, since there are so few steps.
DEMO_RM_SETTINGS = {"max_steps": 20, "eval_every": 20, "max_length": 128, "learning_rate": 1e-4}
DEMO_RM_OWNER = "researcher"


def demo_reward_run() -> TrainingRun | None:
    """The demo reward model's run, queued, running or done; None if there is none yet."""
    runs = TrainingRun.objects.filter(kind=RunKind.RM, log__startswith=DEMO_RM_LOG)
    return runs.exclude(status__in=(RunStatus.FAILED, RunStatus.CANCELLED)).order_by("-id").first()


def queue_demo_reward_model() -> TrainingRun | None:
    """Export the rm-pairs of the rm split here (small: seconds), then queue a fast reward-model run on it
    for the training worker, owned by the demo researcher. None when one exists already or there is
    nothing to train on."""
    if demo_reward_run() is not None:
        return None
    owner = get_user_model().objects.filter(username=DEMO_RM_OWNER).first()
    filters = clean_export_request(ExportFormat.RM_PAIRS, "jsonl", split=Split.RM)
    export = export_now(owner, ExportFormat.RM_PAIRS, filters)
    if not export.row_count:
        return None
    # One transaction: the worker is sent the run (on commit) only once its log names it.
    with transaction.atomic():
        run = request_run(owner, RunKind.RM, export, DEMO_RM_SETTINGS, preset=DEMO_RM_PRESET)
        run.log = DEMO_RM_LOG
        run.save(update_fields=["log"])
    return run
