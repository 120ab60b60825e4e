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
from typing import Any

SMOLLM2 = "smollm2-135m-instruct"
MINILM = "all-minilm-l6-v2"


@dataclass
class CommonConfig:
    data: str = ""  # an export file: JSONL or Parquet
    output_dir: str = ""  # where the trained model folder is written
    base_model: str = SMOLLM2  # a preset name (SMOLLM2, MINILM) or a local Hugging Face model folder
    max_length: int = 512  # tokens per sequence; prompts are cut in the middle, never the completion
    batch_size: int = 4
    gradient_accumulation: int = 1
    learning_rate: float = 5e-5
    epochs: float = 1.0
    max_steps: int = -1  # > 0 caps the optimizer steps (overrides epochs)
    warmup_ratio: float = 0.03
    validation_fraction: float = 0.04  # of the questions, held out (all examples of a question together)
    eval_every: int = 50  # optimizer steps between validations (and checkpoints)
    early_stopping_patience: int = 0  # validations without improvement before stopping; 0 = off
    gradient_checkpointing: bool = False  # ~40% less memory for ~30% more time
    lora_rank: int = 0  # > 0 trains LoRA adapters of that rank (merged into the saved model)
    threads: int = 0  # CPU threads; 0 = torch's default
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> CommonConfig:
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

    def check(self) -> None:
        """Raise ValueError naming the first impossible setting."""
        if not self.data:
            raise ValueError("data: an export file is required")
        if not self.output_dir:
            raise ValueError("output_dir: required")
        for name in ("max_length", "batch_size", "gradient_accumulation", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1")
        if self.max_length < 32:
            raise ValueError("max_length: must be at least 32 tokens")
        if not 0 < self.learning_rate < 1:
            raise ValueError("learning_rate: must be between 0 and 1")
        if self.epochs <= 0 and self.max_steps <= 0:
            raise ValueError("epochs or max_steps: one must be positive")
        if not 0 <= self.validation_fraction < 1:
            raise ValueError("validation_fraction: must be in [0, 1)")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError("warmup_ratio: must be in [0, 1)")
        if self.lora_rank < 0 or self.threads < 0 or self.early_stopping_patience < 0:
            raise ValueError("lora_rank, threads and early_stopping_patience cannot be negative")


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
