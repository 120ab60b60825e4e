"""What a training run is told: one dataclass per trainer, plain values only (stored as JSON on the run).

The defaults are the small-scale versions of WebGPT's recipes (paper, appendix E): behaviour cloning with a
cosine schedule and a held-out split by question; reward models with the pairwise loss, ties as soft 0.5
targets. Presets pick a backbone and the settings that fit it (see ``RM_PRESETS``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Self

SMOLLM2 = "smollm2-135m-instruct"
MINILM = "all-minilm-l6-v2"


class StoredSettings:
    """A settings dataclass kept as JSON on its run: ``to_dict`` and back, refusing what it does not know."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """Build from stored JSON; unknown keys are an error (a typo must not be silently ignored)."""
        defaults = cls()
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(unknown)}")
        for name, value in values.items():
            _check_type(name, value, getattr(defaults, name))
        return cls(
            **{n: float(v) if isinstance(getattr(defaults, n), float) else v for n, v in values.items()}
        )


@dataclass
class CommonConfig(StoredSettings):
    data: str = ""  # an export file: JSONL or Parquet
    output_dir: str = ""  # where the trained model folder is written
    state_dir: str = ""  # where checkpoints to resume from are kept (the job's; "": a scratch folder)
    base_model: str = SMOLLM2  # a preset name (SMOLLM2, MINILM) or a local Hugging Face model folder
    max_length: int = 512  # tokens per sequence; prompts are cut in the middle, never the completion
    batch_size: int = 4
    gradient_accumulation: int = 1
    learning_rate: float = 5e-5
    epochs: float = 1.0
    max_steps: int = -1  # > 0 caps the optimizer steps (overrides epochs)
    warmup_ratio: float = 0.03
    validation_fraction: float = 0.04  # of the questions, held out (all examples of a question together)
    eval_every: int = 50  # optimizer steps between validations
    # Optimizer steps between checkpoints a run resumes from after a crash (model, optimizer, schedule,
    # random states, data position); 0: only at validations, to keep the best model.
    checkpoint_every: int = 50
    early_stopping_patience: int = 0  # validations without improvement before stopping; 0 = off
    gradient_checkpointing: bool = False  # ~40% less memory for ~30% more time
    lora_rank: int = 0  # > 0 trains LoRA adapters of that rank (merged into the saved model)
    threads: int = 0  # CPU threads; 0 = torch's default
    seed: int = 0
    # How the worker runs it (training.runs.processes): data-parallel processes (each a device, or a
    # share of the CPU threads), and how often the sweeper resumes it when its worker dies.
    processes: int = 1
    resume_attempts: int = 0

    def check(self) -> None:
        """Raise ValueError naming the first impossible setting and the range it must be in."""
        if not self.data:
            raise ValueError("data: an export file is required")
        if not self.output_dir:
            raise ValueError("output_dir: required")
        for name, bound in BOUNDS.items():
            bound.check(name, getattr(self, name))
        if self.epochs <= 0 and self.max_steps <= 0:
            raise ValueError("epochs or max_steps: one must be positive")
        keeps_best = self.early_stopping_patience and self.validation_fraction
        if keeps_best and self.checkpoint_every % self.eval_every:
            raise ValueError(
                f"checkpoint_every: must be a multiple of eval_every ({self.eval_every}) when early "
                f"stopping keeps the best validated model, not {self.checkpoint_every}"
            )


@dataclass(frozen=True)
class Bound:
    """The range of one numeric setting: ``low`` to ``high``, each end included unless marked open."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def check(self, name: str, value: float) -> None:
        too_low = value <= self.low if self.low_open else value < self.low
        too_high = value >= self.high if self.high_open else value > self.high
        if too_low or too_high:
            raise ValueError(f"{name}: must be {self.text()}, not {value!r}"[:200])

    def text(self) -> str:
        low = f"more than {self.low}" if self.low_open else f"at least {self.low}"
        high = f"less than {self.high}" if self.high_open else f"at most {self.high}"
        return f"{low} and {high}"


# Every number a run takes has a range: wide enough for a real run on a GPU node, narrow enough that a
# typo or a hostile request cannot queue a billion threads, a trillion-token sequence or a step count
# that overflows the run's row. Forms show the same ranges.
BOUNDS: dict[str, Bound] = {
    "max_length": Bound(32, 32_768),  # tokens; below 32 a prompt and its completion cannot both fit
    "batch_size": Bound(1, 4_096),
    "gradient_accumulation": Bound(1, 1_024),
    "learning_rate": Bound(0, 1, low_open=True, high_open=True),
    "epochs": Bound(0, 100),
    "max_steps": Bound(-1, 10_000_000),  # -1 or 0: the epochs decide; the step counter is a 32-bit column
    "warmup_ratio": Bound(0, 1, high_open=True),  # transformers reads a value of 1 or more as steps
    "validation_fraction": Bound(0, 1, high_open=True),
    "eval_every": Bound(1, 10_000_000),
    "checkpoint_every": Bound(0, 10_000_000),
    "early_stopping_patience": Bound(0, 1_000),
    "lora_rank": Bound(0, 4_096),  # 0 trains every weight
    "threads": Bound(0, 1_024),  # 0: torch's default
    "seed": Bound(0, 2**32 - 1),  # numpy's seed range (transformers seeds numpy too)
    "processes": Bound(1, 1_024),  # the deployment's TRAINING_MAX_PROCESSES is checked with the request
    "resume_attempts": Bound(0, 100),
}


def _check_type(name: str, value: Any, default: Any) -> None:
    """Settings come from forms, the API and stored JSON: a wrong type is refused by name, not met later."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif isinstance(default, list):
        ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ValueError(f"{name}: expected {type(default).__name__}, got {value!r}"[:200])


@dataclass
class BCConfig(CommonConfig):
    """Supervised fine-tuning on ``bc-pairs``: loss on the completion tokens only."""


@dataclass
class RMConfig(CommonConfig):
    """A backbone with a scalar head trained on ``rm-pairs`` / ``rm-groups``."""

    base_model: str = MINILM
    max_length: int = 256
    batch_size: int = 8  # comparisons (pairs or K-way groups) per step
    learning_rate: float = 3e-5
    validation_fraction: float = 0.1
    # Answer ids whose answers are human demonstrations: their mean reward becomes the offset (WebGPT).
    demonstration_answer_ids: list[int] = field(default_factory=list)


# "paper": the BC policy's backbone, as in WebGPT (the default with a GPU); "fast": a 22M-parameter
# sentence encoder that trains in seconds a step on a CPU (the default without one).
RM_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "base_model": SMOLLM2,
        "max_length": 512,
        "batch_size": 8,
        "learning_rate": 1e-5,
        "gradient_checkpointing": True,
    },
    "fast": {"base_model": MINILM, "max_length": 256, "batch_size": 8, "learning_rate": 3e-5},
}


def default_rm_preset() -> str:
    """ "paper" with a GPU, else "fast". The web app must not load torch (seconds, hundreds of MB) to fill
    in a form: it asks torch only where torch is already loaded (a worker), else looks for the NVIDIA
    driver's device node."""
    if "torch" in sys.modules:
        return "paper" if sys.modules["torch"].cuda.is_available() else "fast"
    return "paper" if Path("/dev/nvidiactl").exists() else "fast"


# What a process reward model learns from (training/runs/prm.py): step ratings, step preferences, or both.
PRM_LABELS = ("ratings", "preferences", "both")
# Under this many step labels a run says it learns from too little: PRM800K had about 800,000 step labels,
# Web-Shepherd 40,000 step preference pairs. A run on fewer is a check of the pipeline, not a verifier.
PRM_FEW_LABELS = 1000


@dataclass
class PRMConfig(RMConfig):
    """A scalar-head model trained on ``step-labels`` rows (the reward model's backbone presets)."""

    max_length: int = 384  # an observation is long: it is cut in the middle, the action never
    labels: str = "both"  # ratings, preferences or both

    def check(self) -> None:
        super().check()
        if self.labels not in PRM_LABELS:
            raise ValueError(f"labels must be one of {', '.join(PRM_LABELS)}, not {self.labels!r}")
