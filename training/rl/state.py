"""An RL run's checkpoints, to continue after its worker died: every ``checkpoint_every`` steps the policy,
the optimizer's state, each process's random states, the step and the figures so far; the frozen reference
policy once (the KL penalty's anchor must stay the one the run started with, whatever happens to the
registered model meanwhile). A checkpoint is written to a hidden folder and renamed into place, so a crash
while writing leaves the previous one; only the latest is kept.

The episodes of a step are seeded by the step (training.rl.rollout), so a run that continues from step N
samples what the uninterrupted run sampled after N."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training.rl.ranks import Ranks

PREFIX = "checkpoint-"
REFERENCE = "reference"


@dataclass
class Resumed:
    step: int
    history: list[dict[str, float]]


def latest(folder: Path) -> Path | None:
    """The newest complete checkpoint in ``folder``, if any."""
    if not folder.is_dir():
        return None
    found = [p for p in folder.glob(f"{PREFIX}*") if p.name[len(PREFIX) :].isdigit()]
    return max(found, key=lambda p: int(p.name[len(PREFIX) :]), default=None)


def save(
    folder: Path,
    step: int,
    model: Any,
    reference: Any,
    optimizer: torch.optim.Optimizer,
    history: list[dict[str, float]],
    ranks: Ranks,
) -> None:
    """Checkpoint ``step`` (every process calls this: each writes its random states)."""
    partial = folder / f".{PREFIX}{step}"
    if ranks.main:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        if not (folder / REFERENCE).is_dir():
            reference.save_pretrained(folder / f".{REFERENCE}")
            (folder / f".{REFERENCE}").rename(folder / REFERENCE)
    ranks.wait()
    torch.save(random_states(), partial / f"rng-{ranks.index}.pt")
    ranks.wait()
    if ranks.main:
        model.save_pretrained(partial / "policy")
        torch.save(optimizer.state_dict(), partial / "optimizer.pt")
        (partial / "state.json").write_text(json.dumps({"step": step, "history": history}))
        partial.rename(folder / f"{PREFIX}{step}")
        for older in folder.glob(f"{PREFIX}*"):
            if older.name != f"{PREFIX}{step}":
                shutil.rmtree(older, ignore_errors=True)
    ranks.wait()


def restore(
    folder: Path, model: Any, reference: Any, optimizer: torch.optim.Optimizer, ranks: Ranks
) -> Resumed:
    """Load the latest checkpoint into the model, the reference and the optimizer, and this process's
    random states; the step it was taken after and the figures up to it (step 0 when there is none)."""
    checkpoint = latest(folder)
    if checkpoint is None:
        return Resumed(0, [])
    load_weights(model, checkpoint / "policy")
    load_weights(reference, folder / REFERENCE)
    # Read onto the CPU: load_state_dict moves each state to its weight's device.
    optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location="cpu"))
    rng = checkpoint / f"rng-{ranks.index}.pt"
    if rng.is_file():  # absent when the run continues on more processes than it was saved by
        set_random_states(torch.load(rng, weights_only=False))
    state = json.loads((checkpoint / "state.json").read_text())
    return Resumed(int(state["step"]), list(state["history"]))


def load_weights(model: Any, folder: Path) -> None:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    weights: dict[str, torch.Tensor] = {}
    for path in files:
        weights |= load_file(path, device=str(next(model.parameters()).device))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # Tied weights (the output layer shares the embeddings') are saved once.
    tied = set(getattr(model, "_tied_weights_keys", None) or ())
    if unexpected or set(missing) - tied:
        raise RuntimeError(f"checkpoint {folder} does not fit the policy: {missing or unexpected}")


def random_states() -> dict[str, Any]:
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_random_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
