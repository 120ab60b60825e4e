"""Benchmark training across processes: examples/s of 1 process against 2 under torchrun, on this machine.

The path a run with ``processes: 2`` takes (training/runs/processes.py): torchrun starts the processes, each
trains with our trainers (transformers' Trainer in DDP; the gloo backend on a CPU, NCCL on GPUs). Both
configurations learn from the same global batch (1 process x ``--batch``, or 2 x half of it: the loss curve
is the same, tests/test_training_processes.py), so examples/s compare the same training. On a CPU the
cores are shared, not added: 1 process uses every thread, 2 processes half each (as the worker gives them:
TRAINING_THREADS divided among the processes). On a GPU machine each process has a GPU of its own
(``--gpus``). Data and models as bench/bench_training.py: SmolLM2-135M on ``bc-pairs`` of ~450 tokens, the
fast reward model (all-MiniLM-L6-v2) on ``rm-pairs``.

    .venv/bin/python bench/bench_training_processes.py --out var/bench/training-processes.json

Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "bench"):
    if str(folder) not in sys.path:  # run as a script from a checkout
        sys.path.insert(0, str(folder))

from bench_training import bc_rows, rm_rows, write_jsonl  # noqa: E402

from training.runs.config import MINILM, SMOLLM2  # noqa: E402

MODELS = {"bc": SMOLLM2, "rm": MINILM}


def child(spec: dict[str, Any]) -> None:
    """One process of a measured run (every process under torchrun runs this); the first prints JSON."""
    import torch

    from training.runs.bc import train_bc
    from training.runs.config import BCConfig, RMConfig
    from training.runs.hooks import Hooks
    from training.runs.reward import train_reward_model
    from training.runs.store import resolve_base_model

    times: dict[int, float] = {}

    def mark(step: int, total: int, logs: dict[str, float]) -> None:
        times.setdefault(step, time.perf_counter())

    processes = int(os.environ.get("WORLD_SIZE", "1"))
    Path(spec["work"]).mkdir(parents=True, exist_ok=True)
    warmup, steps = spec["warmup"], spec["steps"]
    common = {
        "base_model": str(resolve_base_model(MODELS[spec["kind"]], Path(spec["store"]))),
        "data": spec["data"],
        "output_dir": str(Path(spec["work"]) / "model"),
        "batch_size": spec["batch"] // processes,
        "max_length": spec["max_length"],
        "max_steps": warmup + steps,
        "validation_fraction": 0.0,
        "checkpoint_every": 0,
        "threads": spec["threads"] // processes if not torch.cuda.is_available() else 0,
    }
    config = BCConfig(**common) if spec["kind"] == "bc" else RMConfig(**common)
    trainer = train_bc if spec["kind"] == "bc" else train_reward_model
    trainer(config, Hooks(on_progress=mark))
    if int(os.environ.get("RANK", "0")) == 0:
        seconds = (times[warmup + steps] - times[warmup]) / steps
        print(
            json.dumps(
                {
                    "kind": spec["kind"],
                    "processes": processes,
                    "batch_per_process": config.batch_size,
                    "global_batch": spec["batch"],
                    "threads_per_process": torch.get_num_threads(),
                    "s_per_step": round(seconds, 3),
                    "examples_per_s": round(spec["batch"] / seconds, 3),
                    "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                }
            )
        )


def measure(spec: dict[str, Any], processes: int) -> dict[str, Any]:
    """``spec`` trained by ``processes`` fresh processes under torchrun; the first one's figures."""
    env = os.environ | {
        "OMP_WAIT_POLICY": "PASSIVE",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env["OMP_NUM_THREADS"] = str(max(1, spec["threads"] // processes))
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
    ]
    command = [*launcher, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    began = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    wall = round(time.perf_counter() - began, 1)
    if done.returncode:
        return {"kind": spec["kind"], "processes": processes, "error": done.stderr.splitlines()[-8:]}
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "training-processes.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--kinds", nargs="+", default=["bc", "rm"], choices=list(MODELS))
    parser.add_argument("--batch", type=int, default=8, help="the global batch (split among processes)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--gpus", type=int, default=0, help="on a GPU machine: processes up to this many")
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))

    from transformers import AutoTokenizer

    from training.runs.store import resolve_base_model

    store = args.out.parent / "bench-models"
    work = args.out.parent / "processes-work"
    cores = len(os.sched_getaffinity(0))
    counts = [1, *range(2, max(2, args.gpus) + 1)]
    results: dict[str, Any] = {
        "machine": {"cpus": cores, "python": platform.python_version(), "gpus": args.gpus},
        "settings": vars(args) | {"out": str(args.out)},
        "runs": [],
        "ratios": {},
    }
    for kind in args.kinds:
        tokenizer = AutoTokenizer.from_pretrained(resolve_base_model(MODELS[kind], store))
        rows = (
            bc_rows(tokenizer, 200, (400, 500), seed=1)
            if kind == "bc"
            else rm_rows(tokenizer, 200, (120, 180), (60, 100), seed=1)
        )
        data = write_jsonl(work / f"{kind}.jsonl", rows)
        spec = {
            "kind": kind, "data": str(data), "store": str(store), "work": str(work / kind),
            "batch": args.batch, "warmup": args.warmup, "steps": args.steps,
            "max_length": 512 if kind == "bc" else 256, "threads": cores,
        }  # fmt: skip
        by_count = {count: measure(spec, count) for count in counts}
        results["runs"].extend(by_count.values())
        if all("examples_per_s" in run for run in by_count.values()):
            one = by_count[1]["examples_per_s"]
            results["ratios"][kind] = {
                f"{count} processes / 1": round(run["examples_per_s"] / one, 3)
                for count, run in by_count.items()
            }
        print(json.dumps(by_count, indent=1), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results["ratios"], indent=1))


if __name__ == "__main__":
    main()
