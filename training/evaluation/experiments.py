"""Experiment reports (WebGPT Figure 3 and Table 2 as a page): chosen policies side by side, every number
read from the rows it came from and linking to them.

A **policy** is what the paper compares: a model sampled best-of-n against a reward model (``PolicyKey``:
the policy's name as its sampling runs record it, n, and the reward model that chose; best-of-1 needs
none). Its finished sampling runs (not those at demonstration states) are its evidence:

- **preference against the demonstrations**: the comparison batches paired "a run's chosen answer against a
  human demonstration" from its runs; side A is the run's answer. People's judgements (the batch headline:
  ties half, gold items left out, 95% bootstrap interval by question) and each judge run's verdicts (both
  orders agreed) as separate figures.
- **preference against another policy**: batches pairing the chosen answers of two runs (run A, run B), from
  each side's point of view.
- **benchmarks**: each benchmark's latest finished run: TriviaQA exact match and F1, TruthfulQA truthful
  and informative by the judge and by people.
- **proxy reward**: the latest finished proxy evaluation of its runs, the validation reward at k = n.
- **cost**: tokens generated and seconds of sampling per question, over its runs.

Nothing is cached: a report shown again reads the data as it stands."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.urls import reverse

from annotation.feedback.result_stats import estimate
from annotation.feedback.results import headline
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.judging.reading import batch_items
from annotation.judging.routed import side_a_score
from annotation.judging.verdicts import run_verdicts
from annotation.models import FeedbackBatch
from training.evaluation.benchmark_scores import results_of
from training.models import Benchmark, BenchmarkRun, Experiment, ProxyEvaluation, SamplingRun
from training.models import RunStatus as Status


@dataclass(frozen=True)
class PolicyKey:
    policy_name: str
    n: int
    reward_model_name: str = ""

    @property
    def label(self) -> str:
        chooser = f" ({self.reward_model_name})" if self.reward_model_name and self.n > 1 else ""
        return f"{self.policy_name} best-of-{self.n}{chooser}"

    @classmethod
    def of(cls, run: SamplingRun) -> PolicyKey:
        return cls(run.policy_name, run.n, run.reward_model_name if run.n > 1 else "")

    @classmethod
    def read(cls, stored: Any) -> PolicyKey:
        """A policy as an experiment stores it; ValueError when it is not one."""
        if not isinstance(stored, dict) or not isinstance(stored.get("policy_name"), str):
            raise ValueError("a policy is {policy_name, n, reward_model_name}")
        n = stored.get("n", 1)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError("n must be a whole number of at least 1")
        return cls(stored["policy_name"], n, str(stored.get("reward_model_name") or "") if n > 1 else "")

    def stored(self) -> dict[str, Any]:
        return asdict(self)


def finished_runs() -> QuerySet[SamplingRun]:
    """The sampling runs that can stand for a policy: done, browsing (not at demonstration states)."""
    return (
        SamplingRun.objects.filter(status=Status.DONE)
        # Not ``exclude(at_states=True)``: a row without the key compares NULL and would be dropped.
        .filter(Q(settings__at_states=False) | Q(settings__at_states__isnull=True))
        .defer("log", "metrics", "question_ids")
        .order_by("pk")
    )


def available_policies() -> list[PolicyKey]:
    """Every policy some finished run stands for, in the order of its first run."""
    found: dict[PolicyKey, None] = {}
    for run in finished_runs():
        found.setdefault(PolicyKey.of(run), None)
    return list(found)


def _figure(label: str, figure: dict[str, Any] | None, url: str, **more: Any) -> dict[str, Any]:
    """One number of the report: its label, value, interval and count, and the page it came from."""
    figure = figure or {}
    return {
        "label": label,
        "value": figure.get("value"),
        "low": figure.get("low"),
        "high": figure.get("high"),
        "questions": figure.get("questions", 0),
        "url": url,
        **more,
    }


def _batch_url(batch: FeedbackBatch) -> str:
    return reverse("console:feedback_results", args=[batch.pk])


def _judge_figures(batch: FeedbackBatch, flip: bool) -> list[tuple[str, dict, str]]:
    """Each judge run's preference for side A (``flip``: for side B, this policy's side)."""
    items = batch_items(batch)
    found = []
    for judge in batch.judge_runs.order_by("pk"):
        scores = [
            (items[item].question, 1 - score if flip else score)
            for item, verdict in run_verdicts(judge).items()
            if item in items and verdict.counts and (score := side_a_score(verdict, items[item])) is not None
        ]
        url = reverse("training:judge_run", args=[judge.pk])
        found.append((judge.judge_name, estimate(scores), url))
    return found


def _preferences(runs: Sequence[SamplingRun], keys: dict[int, PolicyKey]) -> list[dict[str, Any]]:
    """The policy's preference figures: against the demonstrations and against each other policy."""
    ids = {run.pk for run in runs}
    batches = (
        FeedbackBatch.objects.filter(sampling_runs__in=ids, template__in=COMPARISON_TEMPLATES)
        .distinct()
        .order_by("pk")
    )
    figures = []
    for batch in batches:
        origin = batch.origin if isinstance(batch.origin, dict) else {}
        pairing, paired = origin.get("pairing"), [r for r in origin.get("runs", []) if isinstance(r, int)]
        if pairing == "vs_demonstrations" and paired and set(paired) <= ids:
            against, flip = "human demonstrations", False  # side A: the run's answer
        elif pairing == "runs" and len(paired) == 2 and keys.get(paired[0]) != keys.get(paired[1]):
            other = paired[1] if paired[0] in ids else paired[0]
            against, flip = (keys[other].label if other in keys else f"run {other}"), paired[0] not in ids
        else:  # a batch of several policies against the demonstrations, or of one policy's own runs
            continue
        human = headline(batch) or {}
        if flip and human.get("value") is not None:  # this policy is side B: 1 - A's preference
            human = human | {"value": 1 - human["value"], "low": 1 - human["high"], "high": 1 - human["low"]}
        figures.append(_figure(f"Preferred to {against} (people)", human, _batch_url(batch), against=against))
        for judge_name, figure, url in _judge_figures(batch, flip):
            figures.append(_figure(f"Preferred to {against} ({judge_name})", figure, url, against=against))
    return figures


def _benchmarks(runs: Sequence[SamplingRun]) -> list[dict[str, Any]]:
    found = (
        BenchmarkRun.objects.filter(sampling_run__in=[run.pk for run in runs], status=Status.DONE)
        .select_related("sampling_run", "batch", "judge_run")
        .order_by("-finished_at", "-pk")
    )
    latest: dict[str, BenchmarkRun] = {}
    for run in found:
        latest.setdefault(run.benchmark, run)
    figures = []
    for benchmark, run in sorted(latest.items()):
        url, results = reverse("training:benchmark", args=[run.pk]), results_of(run)
        if benchmark == Benchmark.TRIVIAQA:
            figures.append(_figure("TriviaQA exact match", results.get("exact_match"), url))
            figures.append(_figure("TriviaQA F1", results.get("f1"), url))
            continue
        for who in ("judge", "people"):
            found = results.get(who) or {}
            rates = found.get("rates", {})
            if found.get("kind") == "reward_model":  # it judges truthfulness only
                label = "TruthfulQA truthful (reward-model judge)"
                figures.append(_figure(label, rates.get("truthful"), url))
            elif rates:
                label = f"TruthfulQA truthful and informative ({who})"
                figures.append(_figure(label, rates.get("truthful_informative"), url))
    return figures


def _proxy(runs: Sequence[SamplingRun]) -> list[dict[str, Any]]:
    ids = {run.pk: run for run in runs}
    evaluation = (
        ProxyEvaluation.objects.filter(sampling_runs__in=ids, status=Status.DONE)
        .distinct()
        .order_by("-finished_at", "-pk")
        .first()
    )
    if evaluation is None:
        return []
    url = reverse("training:proxy_evaluation", args=[evaluation.pk])
    for curve in (evaluation.results or {}).get("runs", []):
        if curve.get("run") in ids:
            points = {point["k"]: point for point in curve.get("points", [])}
            point = points.get(ids[curve["run"]].n) or (points[max(points)] if points else None)
            if point:
                figure = {k: point[v] for k, v in (("value", "mean"), ("low", "low"), ("high", "high"))}
                label = f"Proxy reward ({evaluation.reward_model_name}, k = {point['k']})"
                return [_figure(label, figure | {"questions": point["questions"]}, url)]
    return []


def _cost(runs: Sequence[SamplingRun]) -> dict[str, Any]:
    questions = sum(len(run.question_ids) for run in runs)
    tokens = sum(run.tokens_generated for run in runs)
    seconds = sum(
        (run.finished_at - run.started_at).total_seconds()
        for run in runs
        if run.finished_at and run.started_at
    )
    return {
        "runs": len(runs),
        "questions": questions,
        "tokens_per_question": tokens / questions if questions else None,
        "seconds_per_question": seconds / questions if questions else None,
    }


def policy_runs(keys: Iterable[PolicyKey]) -> dict[PolicyKey, list[SamplingRun]]:
    wanted = list(keys)
    found: dict[PolicyKey, list[SamplingRun]] = {key: [] for key in wanted}
    for run in finished_runs().only(
        "pk", "policy_name", "n", "reward_model_name", "tokens_generated", "started_at", "finished_at",
        "question_ids", "settings",
    ):  # fmt: skip
        key = PolicyKey.of(run)
        if key in found:
            found[key].append(run)
    return found


def pending_benchmarks(keys: Iterable[PolicyKey]) -> dict[PolicyKey, list[BenchmarkRun]]:
    """The benchmark runs of these policies still queued or running (their figures come when they end)."""
    found: dict[PolicyKey, list[BenchmarkRun]] = {key: [] for key in keys}
    working = BenchmarkRun.objects.filter(status__in=(Status.QUEUED, Status.RUNNING))
    for run in working.select_related("sampling_run").defer("log", "sampling_run__log").order_by("pk"):
        key = PolicyKey.of(run.sampling_run)
        if key in found:
            found[key].append(run)
    return found


def experiment_report(experiment: Experiment) -> dict[str, Any]:
    """The report, JSON-ready: each policy with its runs, figures, cost and benchmark runs still working."""
    keys = [PolicyKey.read(stored) for stored in experiment.policies]
    runs = policy_runs(keys)
    pending = pending_benchmarks(keys)
    run_keys = {run.pk: key for key, found in runs.items() for run in found}
    policies = []
    for key in keys:
        found = runs[key]
        figures = [*_preferences(found, run_keys), *_benchmarks(found), *_proxy(found)]
        policies.append(
            {
                "policy": key.label,
                "key": key.stored(),
                "runs": [
                    {"id": run.pk, "url": reverse("training:sampling_run", args=[run.pk])} for run in found
                ],
                "figures": figures,
                "cost": _cost(found),
                "pending": [
                    {
                        "id": run.pk,
                        "benchmark": run.get_benchmark_display(),
                        "status": run.status,
                        "url": reverse("training:benchmark", args=[run.pk]),
                    }
                    for run in pending[key]
                ],
            }
        )
    return {
        "experiment": {"id": experiment.pk, "name": experiment.name, "notes": experiment.notes},
        "confidence": 0.95,
        "policies": policies,
    }


ROW_FIELDS = ("policy", "label", "value", "low", "high", "questions", "url")  # the CSV's columns


def report_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report as flat rows (the CSV): a row per policy and figure, then its cost."""
    rows = []
    for policy in report["policies"]:
        for figure in policy["figures"]:
            rows.append({"policy": policy["policy"], **{k: figure[k] for k in ROW_FIELDS[1:]}})
        cost = policy["cost"]
        for name in ("tokens_per_question", "seconds_per_question"):
            rows.append(
                {
                    "policy": policy["policy"],
                    "label": name.replace("_", " ").capitalize(),
                    "value": cost[name],
                }
                | {"low": None, "high": None, "questions": cost["questions"], "url": ""}
            )
    return rows
