"""``manage.py judge_batch --batch 3 --reward-model 2 [options]`` or ``--endpoint gpu``: a judge over a
feedback batch's items, run here with a progress bar (the worker's job code), or queued for the sampling
worker with ``--queue``. The options are the API's and the page's, checked by the same
``request_judge_run``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from annotation.models import FeedbackBatch
from annotation.models.judging import JudgeRun
from training.errors import RunError
from training.judging.jobs import run_judge_job
from training.judging.runs import JudgeRequest, request_judge_run
from training.management.commands._train import progress_bar
from training.models import ModelCheckpoint, RunStatus

# setting -> (type, help); an option left out takes the default of judging.runs.DEFAULTS
SETTINGS: dict[str, tuple[type, str]] = {
    "limit": (int, "judge the batch's first this many items by id (default 200)"),
    "seed": (int, "draws each item's order and seeds each request (default 0)"),
    "tie_margin": (float, "reward model: a score difference up to this is a tie (preference logits)"),
    "much_margin": (float, "reward model: beyond this difference, much better"),
    "temperature": (float, "language model: sampling temperature (default 0)"),
    "max_tokens": (int, "language model: the longest verdict in tokens"),
    "confidence_threshold": (float, "routing: the confidence a verdict needs to decide its item"),
    "audit_share": (float, "routing: the share of judge-decided items labelers check anyway"),
}


class Command(BaseCommand):
    help = "Judge a feedback batch's items with a reward model or an endpoint's model, in both orders."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, required=True, help="the feedback batch to judge")
        judge = parser.add_mutually_exclusive_group(required=True)
        judge.add_argument("--reward-model", type=int, help="a registered reward model as the judge")
        judge.add_argument("--endpoint", help="an endpoint of SAMPLING_ENDPOINTS (its model is the judge)")
        for name, (kind, text) in SETTINGS.items():
            parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
        parser.add_argument("--route", action="store_true", help="route the batch by the judge's verdicts")
        parser.add_argument(
            "--check-claims", action="store_true", help="also check labelers' claims against their quotes"
        )
        parser.add_argument("--queue", action="store_true", help="queue the run for the worker and return")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run = request_judge_run(None, self.judge_request(options), queue=options["queue"])
        except RunError as exc:
            option = f"--{exc.field.replace('_', '-')}" if exc.field else ""
            raise CommandError(f"{option}: {exc.reason}" if option else exc.reason) from None
        page = reverse("training:judge_run", kwargs={"pk": run.pk})
        if options["queue"]:
            self.stdout.write(f"judge run {run.pk} queued on the sampling worker; its page: {page}")
            return
        run = run_judge_job(run.pk, echo=self.echo)
        self.stdout.write("")
        if run.status != RunStatus.DONE:
            raise CommandError(f"judge run {run.pk} {run.status}: {run.error} (its page: {page})")
        counts = run.metrics
        self.stdout.write(
            f"judge run {run.pk} done: {counts['judged']} item(s), {counts['unreadable']} unreadable "
            f"output(s), {counts['consistent']} of {counts['both_orders']} the same in both orders; {page}"
        )

    def judge_request(self, options: dict[str, Any]) -> JudgeRequest:
        batch = FeedbackBatch.objects.filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"--batch: feedback batch {options['batch']} does not exist")
        model = None
        if options["reward_model"] is not None:
            model = ModelCheckpoint.objects.filter(pk=options["reward_model"]).first()
            if model is None:
                raise CommandError(f"--reward-model: model {options['reward_model']} does not exist")
        chosen = {name: options[name] for name in SETTINGS if options[name] is not None}
        for flag in ("route", "check_claims"):
            if options[flag]:
                chosen[flag] = True
        return JudgeRequest(
            batch=batch, reward_model=model, endpoint=options["endpoint"] or "", settings=chosen
        )

    def echo(self, run: JudgeRun) -> None:
        bar = progress_bar(run.items_done, run.items_total, {}).rstrip()
        self.stdout.write(f"\r{bar} items", ending="")
        self.stdout.flush()
