"""Sampling episodes on a CUDA GPU: our local backend, and vLLM through our endpoint backend, same run.

    .venv/bin/python bench/bench_sampling_gpu.py --out var/bench/sampling-gpu.json

The episodes of bench/bench_sampling.py (which measures the CPU): SmolLM2-135M-Instruct, converted once
into a store next to --out, browses the FreshWiki demo corpus (indexed into a temp dir) with the prompted
policy, best-of-n episodes of the first demo questions, fixed seed, with a GPU-sized batch (by default
4 questions x best-of-8: every unfinished episode is one row of each round's batch). Two runs:

- local: ``LocalBackend`` on cuda (fp32, the prompt cache, our batched decode, constrained commands);
- vllm: vLLM's OpenAI server (bench/serving.py) started on the same converted folder on a free local port
  (its own dtype choice, recorded; at most half the GPU's memory), ``EndpointBackend`` with ``server: vllm``
  sending every round's requests at once, each step's command grammar as vLLM's structured outputs (a
  regex), then the server is stopped.
  Without vllm installed (``pip install vllm`` on a GPU machine) this run is recorded as skipped.

Reported per run: wall seconds, generated tokens/s, episodes/minute, the environment's share of the wall
time (search, fetch, render), the valid-action rate, prompt tokens (and, locally, those reused from the
prompt cache and the peak GPU memory); with the GPU's name and the torch, transformers (and vllm)
versions. Without a CUDA GPU it says so, writes {"skipped": ...} to --out and exits with status 0 (so that
`make bench` goes on). Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_sampling import CORPUS, QUESTIONS, Counting  # noqa: E402
from bench.serving import vllm_serve  # noqa: E402

if TYPE_CHECKING:
    from training.sampling.episode import SamplingSettings

SERVER_START_S = 900  # vLLM's first start compiles and captures CUDA graphs: minutes


def episodes(backend: Any, index: Path, questions: list[str], settings: SamplingSettings) -> dict[str, Any]:
    """Runs every question's episodes through ``backend`` (a warm-up request first) and sums them up."""
    from browser.engine.browser import Browser
    from browser.engine.settings import BrowserSettings
    from browser.search.local import LocalIndex
    from training.sampling.episode import run_episodes
    from training.sampling.policies import PromptedPolicy
    from training.sampling.types import CompletionRequest, Message

    counted = Counting(backend)
    counted.complete([CompletionRequest(messages=(Message("user", "Hello"),), max_new_tokens=4, seed=1)])
    counted.prompt_tokens = counted.reused_tokens = 0  # not the warm-up
    search = LocalIndex.open(index)
    browsers = [Browser(search, BrowserSettings()) for _ in questions]
    started = time.perf_counter()
    samples = run_episodes(PromptedPolicy(counted), browsers, questions, settings)
    wall = time.perf_counter() - started
    steps = [step for sample in samples for step in sample.steps]
    tokens = sum(sample.tokens_generated for sample in samples)
    env = sum(sample.env_seconds for sample in samples)
    return {
        "wall_s": round(wall, 2),
        "episodes": len(samples),
        "actions": len(steps),
        "answers": sum(sample.answer is not None for sample in samples),
        "tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1),
        "episodes_per_min": round(len(samples) / wall * 60, 2),
        "env_share": round(env / wall, 4),
        "prompt_tokens": counted.prompt_tokens,
        "reused_prompt_tokens": counted.reused_tokens,
        "valid_action_rate": round(sum(step.valid for step in steps) / max(1, len(steps)), 4),
        "commands": [sample.commands for sample in samples],
    }


def local_run(model: Path, index: Path, questions: list[str], settings: SamplingSettings) -> dict[str, Any]:
    import torch

    from training.sampling.local import LocalBackend

    backend = LocalBackend(model, device="cuda")
    backend.table  # noqa: B018 - the constraint table is built once per process; not part of the timing
    torch.cuda.reset_peak_memory_stats()
    result = episodes(backend, index, questions, settings)
    result["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
    del backend  # the GPU's memory goes back before vLLM asks for its share
    torch.cuda.empty_cache()
    return result


def vllm_run(
    model: Path, index: Path, questions: list[str], settings: SamplingSettings, dtype: str, log: Path
) -> dict[str, Any]:
    """Serves ``model`` with vLLM, runs the episodes through ``EndpointBackend``, stops the server."""
    from training.sampling.endpoint import EndpointBackend

    if importlib.util.find_spec("vllm") is None:
        return {"skipped": "vllm is not installed (pip install vllm on a GPU machine)"}
    started = time.perf_counter()
    try:
        with vllm_serve(model, log, SERVER_START_S, seed=settings.seed, dtype=dtype) as served:
            start_s = round(time.perf_counter() - started, 1)
            # Every round's requests in flight at once, so that vLLM batches them as our backend does; the
            # command grammar goes as vLLM's structured outputs (``server: vllm``).
            backend = EndpointBackend(
                served.base_url, served.model, server="vllm", timeout_s=300, max_parallel=len(questions)
            )
            result = episodes(backend, index, questions, settings)
    except RuntimeError as failure:  # the server did not start, or a request failed (BackendError)
        return {"error": str(failure), "log_tail": log.read_text()[-3000:]}
    version = importlib.metadata.version("vllm")
    return {"version": version, "dtype": dtype, "server_start_s": start_s, **result}


def show(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """Prints a run's numbers (without its commands and log) as they come; returns the result."""
    shown = {k: v for k, v in result.items() if k not in ("commands", "log_tail")}
    print(f"  {name}: {json.dumps(shown)}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "sampling-gpu.json")
    parser.add_argument("--questions", type=int, default=4, help="the first demo questions")
    parser.add_argument("--n", type=int, default=8, help="episodes per question (best-of-n)")
    parser.add_argument("--max-actions", type=int, default=6, help="the action limit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vllm-dtype", default="auto", help="vLLM's --dtype (auto: vLLM's choice)")
    args = parser.parse_args()
    began = time.perf_counter()
    import torch
    import transformers

    args.out.parent.mkdir(parents=True, exist_ok=True)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    if not torch.cuda.is_available():
        reason = "no CUDA GPU here (torch.cuda.is_available() is False): nothing measured"
        print(f"bench_sampling_gpu: {reason}. bench/bench_sampling.py measures sampling on the CPU.")
        args.out.write_text(json.dumps({"skipped": reason, **versions}, indent=2) + "\n")
        print(f"wrote {args.out}")
        return
    os.environ["HF_HUB_OFFLINE"] = "1"  # everything is on disk; vLLM inherits it
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    from browser.corpus.readers import read_corpus
    from browser.search.local import LocalIndex
    from training.runs.config import SMOLLM2
    from training.runs.store import resolve_base_model
    from training.sampling.episode import SamplingSettings

    folder = args.out.parent / "sampling-gpu"
    folder.mkdir(parents=True, exist_ok=True)
    model = resolve_base_model(SMOLLM2, args.out.parent / "models")
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    chosen = [row["question"] for row in rows[: args.questions]]
    # The command and answer limits of bench_sampling.py, so that its CPU numbers compare.
    settings = SamplingSettings(
        max_actions=args.max_actions, max_command_tokens=32, max_answer_tokens=64, seed=args.seed
    )
    results: dict[str, Any] = {
        "model": SMOLLM2,
        "policy": "prompted",
        "questions": chosen,
        "n": args.n,
        "max_actions": args.max_actions,
        "command_tokens": settings.max_command_tokens,
        "answer_tokens": settings.max_answer_tokens,
        "seed": args.seed,
        "machine": {
            "gpu": torch.cuda.get_device_name(0),
            "gpu_memory_gb": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            **versions,
        },
        "runs": {},
    }
    questions = [q for q in chosen for _ in range(args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "freshwiki"
        LocalIndex.open(index).add(read_corpus(CORPUS, "freshwiki"))
        results["runs"]["local"] = show("local", local_run(model, index, questions, settings))
        vllm = vllm_run(model, index, questions, settings, args.vllm_dtype, folder / "vllm.log")
        results["runs"]["vllm"] = show("vllm", vllm)
    runs = results["runs"]
    if "tokens_per_s" in runs["vllm"]:
        results["vllm_over_local_tokens_per_s"] = round(
            runs["vllm"]["tokens_per_s"] / runs["local"]["tokens_per_s"], 2
        )
    results["bench_s"] = round(time.perf_counter() - began, 1)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
