"""``manage.py run_experiment FILE [--output report.html]``: an experiment file (TOML,
``training.evaluation.experiment_files``) run end to end here: every benchmark of every policy (the
worker's job code: the policy answers, then the answers are scored), then the report of the policies,
printed as its page's address and written as a static HTML file with ``--output``.

The file and every request are checked before anything runs; a benchmark that fails stops the command
with its reason (the runs before it stay, as on the pages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from training.errors import RunError
from training.evaluation.benchmark_jobs import run_benchmark_job
from training.evaluation.benchmark_runs import BenchmarkRequest, check_benchmark, request_benchmark
from training.evaluation.experiment_files import ExperimentFileError, ExperimentPlan, read_plan
from training.evaluation.experiment_service import create_experiment
from training.evaluation.experiment_views import static_report
from training.evaluation.experiments import PolicyKey
from training.models import RunStatus
from training.sampling.runs import SamplingRequest, check_settings, policy_name


class Command(BaseCommand):
    help = "Run an experiment file's benchmarks for each of its policies and make its report."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the experiment file (TOML)")
        parser.add_argument("--output", help="write the report as a static HTML file here")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from None
        try:
            plan = read_plan(text)
        except ExperimentFileError as exc:
            raise CommandError(f"{path}: {exc}") from None
        requests = self.requests(plan)
        keys: list[PolicyKey] = []
        for policy_requests, fallback in requests:
            key = fallback
            for request in policy_requests:
                key = self.run_one(request)
            keys.append(key)
        try:
            experiment = create_experiment(None, plan.name, keys, plan.notes, source=text)
        except RunError as exc:
            raise CommandError(f"{exc.field}: {exc.reason}" if exc.field else exc.reason) from None
        self.stdout.write(f"report {experiment.pk}: {reverse('training:experiment', args=[experiment.pk])}")
        if options["output"]:
            Path(options["output"]).write_text(static_report(None, experiment), encoding="utf-8")
            self.stdout.write(f"written to {options['output']}")

    def requests(self, plan: ExperimentPlan) -> list[tuple[list[BenchmarkRequest], PolicyKey]]:
        """Each policy's benchmark requests, all checked now, and the policy's key."""
        planned = []
        for i, policy in enumerate(plan.policies, start=1):
            settings = plan.settings | {"n": policy.n}
            sampling = SamplingRequest(
                policy=policy.policy, reward_model=policy.reward_model, settings=settings
            )
            key = PolicyKey(
                policy_name(policy.policy, "local"),
                policy.n,
                policy.reward_model.name if policy.reward_model and policy.n > 1 else "",
            )
            requests = []
            for j, benchmark in enumerate(plan.benchmarks, start=1):
                request = BenchmarkRequest(
                    benchmark=benchmark.name,
                    sampling=sampling,
                    limit=plan.questions,
                    judge_endpoint=benchmark.judge_endpoint,
                    judge_reward_model=benchmark.judge_reward_model,
                    people=benchmark.people,
                )
                try:
                    check_settings(settings)
                    check_benchmark(request)
                except RunError as exc:
                    raise CommandError(f"policies[{i}], benchmarks[{j}]: {exc}") from None
                requests.append(request)
            planned.append((requests, key))
        return planned

    def run_one(self, request: BenchmarkRequest) -> PolicyKey:
        try:
            run = request_benchmark(None, request, queue=False)
        except RunError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{run.get_benchmark_display()} run {run.pk}: {run.sampling_run.policy_name} ...")
        run = run_benchmark_job(run.pk)
        if run.status != RunStatus.DONE:
            raise CommandError(f"benchmark run {run.pk} {run.status}: {run.error}")
        self.stdout.write(f"  done: {reverse('training:benchmark', args=[run.pk])}")
        return PolicyKey.of(run.sampling_run)
