"""RL runs as the web app, the API and the ``train_rl`` command ask for them: the one check
(``training.rl.inputs.check_rl``), the questions resolved into the row (so the run can be reproduced from
it), the job queued on the ``training`` queue once the row is committed. Nothing here loads torch."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.jobs.queueing import enqueue
from core.models import log_action
from training.models import RunKind, TrainingRun
from training.rl.inputs import RLRequest, check_rl

# Where browsing episodes search: kept beside the trainer's settings in the run's config (the job takes
# them out before it builds the RLConfig).
ENVIRONMENT = ("search", "corpus")


def request_rl_run(user: Any, request: RLRequest, *, queue: bool = True) -> TrainingRun:
    """Check, create the row and queue the job once committed. Raises RunError with the reason."""
    config, ids = check_rl(request)
    source = {"ids": True} if request.ids else request.questions.describe() | {"split": "rl"}
    with transaction.atomic():
        run = TrainingRun.objects.create(
            kind=RunKind.RL,
            owner=user if getattr(user, "is_authenticated", False) else None,
            base_checkpoint=request.base,
            reward_model=request.reward_model,
            reward_model_name=request.reward_model.name if request.reward_model else "",
            question_source=source,
            question_ids=ids,
            config=config.to_dict() | {"search": request.search, "corpus": request.corpus},
            total_steps=config.steps,
        )
        log_action(user, "training.request", run, kind=run.kind, questions=len(ids), config=run.config)
        if queue:
            enqueue(run)
    return run
