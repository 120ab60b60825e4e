"""What a training run may be asked for, checked in one place for every way of asking: the new-run page,
the API and the train_bc/train_rm commands all call ``check_run`` (the first two through
``jobs.request_run``), so they accept and refuse the same input with the same words.

Nothing here loads torch: the web app imports it to check a request."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from annotation.models import Export, ExportFormat, ExportStatus
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind
from training.runs.config import (
    MINILM,
    RM_PRESETS,
    SMOLLM2,
    BCConfig,
    CommonConfig,
    PRMConfig,
    RMConfig,
    default_rm_preset,
)
from training.runs.processes import check_processes
from training.runs.store import model_width

FORMATS = {
    RunKind.BC: (ExportFormat.BC_PAIRS,),
    RunKind.RM: (ExportFormat.RM_PAIRS, ExportFormat.RM_GROUPS),
    RunKind.RM_EVAL: (ExportFormat.RM_PAIRS, ExportFormat.RM_GROUPS),
    RunKind.PRM: (ExportFormat.STEP_LABELS,),
}
# Kinds with a scalar head on a backbone preset (training.runs.config.RM_PRESETS).
SCALAR_KINDS = (RunKind.RM, RunKind.PRM)
PRESET_MODELS = (SMOLLM2, MINILM)
# Filled in by the job from the export and the model store, never by whoever asks for the run.
JOB_SETTINGS = frozenset({"data", "output_dir", "state_dir", "demonstration_answer_ids"})
SETTABLE = tuple(f.name for f in fields(PRMConfig) if f.name not in JOB_SETTINGS)  # PRMConfig has them all
PRM_ONLY = frozenset({f.name for f in fields(PRMConfig)} - {f.name for f in fields(RMConfig)})


def check_run(
    kind: str,
    export: Export | None,
    preset: str,
    settings: dict[str, Any],
    base: ModelCheckpoint | None,
    *,
    local_paths: bool = False,
) -> tuple[str, CommonConfig]:
    """The preset the run uses ("" where none applies) and its checked config, or RunError.

    ``export`` is None for the commands' ``--data FILE`` mode. ``local_paths`` lets an operator at the
    command line name a model folder as ``base_model``; a page or an API request names a preset or a
    registered model (``base``), so no path from a request reaches the config or the trainer."""
    if kind not in FORMATS:
        raise RunError(f"expected one of {', '.join(FORMATS)}", "kind")
    if export is not None:
        check_export(kind, export)
    preset = (preset or default_rm_preset()) if kind in SCALAR_KINDS else ""
    check_base(kind, preset, base)
    if kind == RunKind.RM_EVAL:
        if settings:
            raise RunError("an evaluation scores with the settings its model was trained with", "settings")
        return preset, config_for(kind, preset, {})
    return preset, check_settings(kind, preset, settings, base, local_paths=local_paths)


def check_export(kind: str, export: Export) -> None:
    if export.status != ExportStatus.DONE:
        raise RunError(f"export {export.pk} is not finished", "export")
    if export.export_format not in FORMATS[kind]:
        wanted = " or ".join(FORMATS[kind])
        raise RunError(f"a {kind} run needs a {wanted} export, not {export.export_format}", "export")


def check_base(kind: str, preset: str, base: ModelCheckpoint | None) -> None:
    """Which registered model fits which kind of run."""
    if kind == RunKind.RM_EVAL and (base is None or base.kind != RunKind.RM):
        raise RunError("an evaluation needs a reward model to evaluate", "base_checkpoint")
    if base is None:
        return
    if kind == RunKind.BC and base.kind != RunKind.BC:
        raise RunError("behaviour cloning continues from a BC model only", "base_checkpoint")
    if kind == RunKind.PRM and base.kind not in (RunKind.BC, RunKind.PRM):
        raise RunError(
            "a process reward model continues from a BC model or a process reward model", "base_checkpoint"
        )
    if kind in SCALAR_KINDS and base.kind == RunKind.BC and preset != "paper":
        raise RunError(
            "a BC model is a SmolLM2 policy: use the paper preset, whose settings fit it", "preset"
        )


def check_settings(
    kind: str, preset: str, settings: dict[str, Any], base: ModelCheckpoint | None, *, local_paths: bool
) -> CommonConfig:
    """Known names, the right types, every number in its range (training.runs.config.BOUNDS), and a base
    model that is a preset (or, for an operator, a local folder)."""
    if not isinstance(settings, dict):
        raise RunError("expected an object of setting names and values", "settings")
    unknown = sorted(str(name) for name in settings if name not in SETTABLE)
    if unknown:
        raise RunError(f"unknown setting(s): {', '.join(unknown)}"[:300], "settings")
    if kind != RunKind.PRM and (wrong := sorted(PRM_ONLY & set(settings))):
        raise RunError("only for a process reward model", wrong[0])
    overrides = dict(settings)
    if "base_model" in overrides:
        if base is not None:
            raise RunError("give a preset model or a base checkpoint, not both", "base_model")
        if not local_paths and overrides["base_model"] not in PRESET_MODELS:
            raise RunError(
                f"expected {' or '.join(PRESET_MODELS)}; to start from a trained model, choose it as "
                "the base checkpoint (a registered model)",
                "base_model",
            )
    if base is not None:
        overrides["base_model"] = base.path  # from the registry, not from the request
    config = config_for(kind, preset, overrides)
    try:
        replace(config, data="export", output_dir="model").check()  # the job fills in these two
    except ValueError as exc:
        raise _named(exc) from None
    check_lora_rank(config, base)
    check_processes(config.processes)
    return config


def check_lora_rank(config: CommonConfig, base: ModelCheckpoint | None) -> None:
    """LoRA's rank is the inner size of a low-rank update of the model's weights: above the model's width
    the update is no longer low-rank, only larger than the weight it adapts. Unchecked when the width cannot
    be read here (the trainer's model is then in object storage)."""
    width = model_width(config.base_model)
    if width is None and base is not None:
        width = model_width(base.base_model)
    if width is not None and config.lora_rank > width:
        model = base.name if base is not None else config.base_model
        reason = f"must be at most {width}, the width (hidden size) of {model}, not {config.lora_rank}"
        raise RunError(reason, "lora_rank")


def config_for(kind: str, preset: str, overrides: dict[str, Any]) -> CommonConfig:
    """The trainer's config: the dataclass defaults, then the preset, then the caller's settings."""
    try:
        if kind == RunKind.BC:
            return BCConfig.from_dict(overrides)
        preset = preset or default_rm_preset()
        if preset not in RM_PRESETS:
            raise RunError(f"expected one of {', '.join(RM_PRESETS)}", "preset")
        config = PRMConfig if kind == RunKind.PRM else RMConfig
        return config.from_dict(RM_PRESETS[preset] | overrides)
    except RunError:
        raise
    except ValueError as exc:
        raise _named(exc) from None


def _named(exc: ValueError) -> RunError:
    """training.runs.config says "name: reason"; keep the name as the field when it is a setting."""
    name, _, reason = str(exc).partition(": ")
    return RunError(reason, name) if reason and name in SETTABLE else RunError(str(exc), "settings")
