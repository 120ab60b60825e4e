#!/usr/bin/env bash
# Training across the GPUs of one machine (docs/training.md, "Several processes and runs that resume"):
#   1. examples/s of BC (SmolLM2-135M) and the reward model with 1, 2, ... N processes (N = the GPUs here),
#      one GPU each under torchrun with NCCL, the same global batch (bench/bench_training_processes.py);
#   2. the 2-process and kill-and-resume tests on this machine (tests/test_training_processes.py: they run
#      their processes on the GPUs when there are two, else on the CPU with gloo).
# Needs the project's install (make install) and PostgreSQL and Redis for step 2 (scripts/ensure-services.sh);
# no network. Writes var/bench/training-processes-gpu.json; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
[ "$GPUS" -ge 1 ] || { echo "check-training-processes: no CUDA GPU here" >&2; exit 1; }
"$PY" bench/bench_training_processes.py --gpus "$GPUS" --out var/bench/training-processes-gpu.json "$@"
DEBUG=1 HYPOTHESIS_PROFILE=ci "$PY" -m pytest -q -n 0 -p no:cacheprovider tests/test_training_processes.py
