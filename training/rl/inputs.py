"""What an RL run may be asked for, checked in one place for every way of asking: the new-RL-run page, the
API and the ``train_rl`` command all call ``check_rl`` (through ``training.rl.runs.request_rl_run``), so they
accept and refuse the same input with the same words.

The questions are chosen as a sampling run's are (``training.sampling.runs.QuestionSet``: a batch, a
dataset, the first ``limit`` by id) or by id, from the ``rl`` split only: the paper keeps the questions of
behaviour cloning, reward modelling and RL disjoint, so a run on another split's questions is refused by
name. Nothing here loads torch: the web app imports it to check a request."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from annotation.models import Answer, Episode, EpisodeStatus, Question, Split
from browser.sources import LOCAL, check_source
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind
from training.rl.config import ANSWER, POLICY_FORMATS, PROMPTED, RL_SETTABLE, RLConfig, saved_policy_format
from training.runs.config import SMOLLM2
from training.runs.processes import check_processes
from training.sampling.runs import BOUNDS as SAMPLING_BOUNDS
from training.sampling.runs import QuestionSet, question_ids

START_KINDS = (RunKind.BC, RunKind.RL)  # a policy continues from a BC model or an earlier RL run
MAX_QUESTIONS = int(SAMPLING_BOUNDS["limit"][1])


@dataclass(frozen=True)
class RLRequest:
    """An RL run as asked for. ``ids``: questions by id (then ``questions`` is not used)."""

    reward_model: ModelCheckpoint | None
    base: ModelCheckpoint | None = None  # the starting policy; None: the prompted SmolLM2 default
    questions: QuestionSet = field(default_factory=lambda: QuestionSet(split=Split.RL))
    ids: tuple[int, ...] = ()
    search: str = LOCAL  # where browsing episodes search (browser.sources)
    corpus: str = ""
    settings: dict[str, Any] = field(default_factory=dict)


def check_rl(request: RLRequest) -> tuple[RLConfig, list[int]]:
    """The run's config (without the settings the job fills in) and its question ids, or RunError naming
    the input it is about."""
    if request.base is not None and request.base.kind not in START_KINDS:
        raise RunError(
            "the starting policy must be a BC or RL model (or empty: the prompted SmolLM2 default)",
            "base_checkpoint",
        )
    if request.reward_model is None:
        raise RunError("choose the reward model the policy is trained against", "reward_model")
    if request.reward_model.kind != RunKind.RM:
        raise RunError("the reward model must be a registered reward model", "reward_model")
    config = check_settings(request.settings)
    if request.base is not None:
        config.base_model = request.base.path  # from the registry: a deleted base is told from the default
    if problem := check_source(request.search, request.corpus):
        name, reason = problem
        raise RunError(reason.rstrip("."), name)
    ids = rl_question_ids(request.questions, request.ids)
    if config.episodes == ANSWER and not has_reference(ids):
        raise RunError(
            "answer-only episodes need a reference (an answer with quotes, or a finished episode with "
            "quotes) for at least one of the chosen questions, and none has one: demonstrate or sample "
            "some first, or choose browsing episodes",
            "questions",
        )
    return config, ids


def check_settings(given: dict[str, Any]) -> RLConfig:
    """Known names (``RL_SETTABLE``: the rest are the job's), the right types, each number in its range
    (``RL_BOUNDS``)."""
    if not isinstance(given, dict):
        raise RunError("expected an object of setting names and values", "settings")
    unknown = sorted(str(name) for name in given if name not in RL_SETTABLE)
    if unknown:
        raise RunError(f"unknown setting(s): {', '.join(unknown)}"[:300], "settings")
    try:
        config = RLConfig.from_dict(dict(given))
        replace(config, output_dir="model", reward_model="reward model").check()  # the job's two
    except ValueError as exc:
        name, _, reason = str(exc).partition(": ")
        field = name if reason and name in RL_SETTABLE else "settings"
        raise RunError(reason if field == name else str(exc), field) from None
    check_processes(config.processes)
    return config


def check_file_run(
    settings: dict[str, Any],
    reward_model: Path,
    output: Path,
    base_model: str = SMOLLM2,
    policy_format: str = "",
) -> RLConfig:
    """The config of a run outside the registry (``manage.py train_rl --questions-file``): the settings as
    every request's (``check_settings``), and the four the job fills in from the command line instead (the
    models' folders, the output, and how the policy is asked: by default as the job asks it, the prompted
    preset prompted and a folder as its training.json says)."""
    config = check_settings(settings)
    if not (reward_model / "config.json").is_file():
        raise RunError(f"{reward_model} is not a model folder (no config.json)", "reward_model_dir")
    base = Path(base_model)
    if base_model != SMOLLM2 and not (base / "config.json").is_file():
        raise RunError(f"neither {SMOLLM2} nor a model folder (no config.json in {base_model})", "base_model")
    if not policy_format:
        policy_format = PROMPTED if base_model == SMOLLM2 else saved_policy_format(base)
    if policy_format not in POLICY_FORMATS:
        raise RunError(f"expected one of {', '.join(POLICY_FORMATS)}", "policy_format")
    return replace(
        config,
        output_dir=str(output.resolve()),
        reward_model=str(reward_model.resolve()),
        base_model=base_model if base_model == SMOLLM2 else str(base.resolve()),
        policy_format=policy_format,
    )


def rl_question_ids(chosen: QuestionSet, ids: tuple[int, ...]) -> list[int]:
    """The ids of the chosen questions, all of the ``rl`` split."""
    if chosen.split not in ("", Split.RL):
        raise RunError(
            f"RL trains on questions of the rl split only, not {chosen.split}: the paper keeps the "
            "questions of behaviour cloning, reward modelling and RL apart",
            "split",
        )
    if not ids:
        return question_ids(replace(chosen, split=Split.RL))
    if len(ids) > MAX_QUESTIONS or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise RunError(f"expected at most {MAX_QUESTIONS} question ids", "question_ids")
    found = dict(Question.objects.filter(pk__in=ids).values_list("pk", "split"))
    missing = sorted(set(ids) - set(found))
    if missing:
        raise RunError(f"no such question(s): {', '.join(map(str, missing[:20]))}", "question_ids")
    others = sorted(pk for pk, split in found.items() if split != Split.RL)
    if others:
        raise RunError(
            f"question(s) {', '.join(map(str, others[:20]))} are not in the rl split: the paper keeps the "
            "questions of behaviour cloning, reward modelling and RL apart",
            "question_ids",
        )
    return list(dict.fromkeys(ids))


def has_reference(ids: list[int]) -> bool:
    """Whether any of these questions has quotes to answer from: an answer's, or a finished episode's."""
    answers = Answer.objects.filter(question_id__in=ids).exclude(quotes=[])
    episodes = Episode.objects.filter(
        question_id__in=ids, status=EpisodeStatus.FINISHED, state__quotes__0__isnull=False
    )
    return answers.exists() or episodes.exists()
