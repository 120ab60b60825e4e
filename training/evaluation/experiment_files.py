"""Experiment files (TOML): the policies, the benchmarks each runs, and the sampling settings, so that a
report is made again on new data with one command (``manage.py run_experiment FILE``). Read and checked
whole before anything runs: an error names its place in the file and nothing is created.

    name = "BC against best-of-4"
    notes = "Demo data, CPU."
    questions = 20                    # eval questions per benchmark (default 50)

    [settings]                        # sampling settings for every policy (the sampling run's, by name)
    max_actions = 10
    seed = 0

    [[policies]]
    model = "demo-bc"                 # a registered BC or RL model by name; left out: the prompted default
    n = 1

    [[policies]]
    model = "demo-bc"
    n = 4
    reward_model = "demo-rm"          # a registered reward model by name (best-of-n chooses by it)

    [[benchmarks]]
    name = "triviaqa"

    [[benchmarks]]
    name = "truthfulqa"
    judge_endpoint = "judge"          # an endpoint of SAMPLING_ENDPOINTS, or judge_reward_model = "<name>"
    people = true                     # the rating batch opened to labelers

The report gathers, besides the benchmark runs the command makes, every comparison batch, judge run and
proxy evaluation of the policies' finished sampling runs (``experiments``)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

from training.evaluation.benchmark_runs import DEFAULT_LIMIT
from training.models import POLICY_KINDS, ModelCheckpoint, RunKind
from training.sampling.runs import SETTABLE

POLICY_KEYS = {"model", "n", "reward_model"}
BENCHMARK_KEYS = {"name", "judge_endpoint", "judge_reward_model", "people"}
TOP_KEYS = {"name", "notes", "questions", "settings", "policies", "benchmarks"}


class ExperimentFileError(ValueError):
    """What is wrong with the file and where."""


@dataclass(frozen=True)
class PlannedPolicy:
    policy: ModelCheckpoint | None
    reward_model: ModelCheckpoint | None
    n: int


@dataclass(frozen=True)
class PlannedBenchmark:
    name: str
    judge_endpoint: str = ""
    judge_reward_model: ModelCheckpoint | None = None
    people: bool = False


@dataclass(frozen=True)
class ExperimentPlan:
    name: str
    notes: str
    questions: int
    settings: dict[str, Any]
    policies: list[PlannedPolicy] = field(default_factory=list)
    benchmarks: list[PlannedBenchmark] = field(default_factory=list)


def _unknown(given: dict[str, Any], allowed: set[str], where: str) -> None:
    if extra := sorted(set(given) - allowed):
        raise ExperimentFileError(
            f"{where}: unknown key {extra[0]!r}; expected one of {', '.join(sorted(allowed))}"
        )


def _model(name: Any, kinds: tuple[str, ...], where: str) -> ModelCheckpoint:
    if not isinstance(name, str) or not name.strip():
        raise ExperimentFileError(f"{where}: expected a registered model's name")
    found = ModelCheckpoint.objects.filter(name=name, kind__in=kinds).order_by("-pk").first()
    if found is None:
        raise ExperimentFileError(f"{where}: no registered model named {name!r} of kind {'/'.join(kinds)}")
    return found


def read_plan(text: str) -> ExperimentPlan:
    """The plan of an experiment file, or ExperimentFileError saying where it is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentFileError(f"not TOML: {exc}") from None
    _unknown(data, TOP_KEYS, "the file")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ExperimentFileError("name: the report's name is required")
    questions = data.get("questions", DEFAULT_LIMIT)
    if isinstance(questions, bool) or not isinstance(questions, int) or not 1 <= questions <= 10_000:
        raise ExperimentFileError("questions: expected a whole number from 1 to 10000")
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise ExperimentFileError("settings: expected a table")
    _unknown(settings, set(SETTABLE) - {"n", "at_states", "guide_k", "limit"}, "settings")
    policies = []
    for i, given in enumerate(data.get("policies", []), start=1):
        where = f"policies[{i}]"
        if not isinstance(given, dict):
            raise ExperimentFileError(f"{where}: expected a table")
        _unknown(given, POLICY_KEYS, where)
        policy = _model(given["model"], tuple(POLICY_KINDS), f"{where}.model") if "model" in given else None
        reward = (
            _model(given["reward_model"], (RunKind.RM,), f"{where}.reward_model")
            if "reward_model" in given
            else None
        )
        n = given.get("n", 1)
        if isinstance(n, bool) or not isinstance(n, int):
            raise ExperimentFileError(f"{where}.n: expected a whole number")
        policies.append(PlannedPolicy(policy, reward, n))
    if not policies:
        raise ExperimentFileError("policies: name at least one ([[policies]])")
    benchmarks = []
    for i, given in enumerate(data.get("benchmarks", []), start=1):
        where = f"benchmarks[{i}]"
        if not isinstance(given, dict):
            raise ExperimentFileError(f"{where}: expected a table")
        _unknown(given, BENCHMARK_KEYS, where)
        people = given.get("people", False)
        if not isinstance(people, bool):
            raise ExperimentFileError(f"{where}.people: expected true or false")
        judge = given.get("judge_reward_model")
        judge_model = (
            _model(judge, (RunKind.RM,), f"{where}.judge_reward_model") if judge is not None else None
        )
        name_given, endpoint = str(given.get("name", "")), str(given.get("judge_endpoint", ""))
        benchmarks.append(PlannedBenchmark(name_given, endpoint, judge_model, people))
    return ExperimentPlan(name.strip(), str(data.get("notes", "")), questions, settings, policies, benchmarks)
