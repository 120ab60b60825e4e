#!/usr/bin/env bash
# `make run`: migrate, load the demo data, start a Celery worker and the web server on 127.0.0.1:$PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}"
PORT="${PORT:-8000}"
# The demo corpus answers only the demo batch's questions: no TriviaQA/NQ questions from the bc split.
export DEMONSTRATION_SPLIT_FALLBACK="${DEMONSTRATION_SPLIT_FALLBACK:-0}"
PY=.venv/bin/python

$PY manage.py migrate --noinput -v 0
$PY manage.py load_demo
mkdir -p var
# SERVE=1: also run the prompted default model (SmolLM2, converted once) behind `transformers serve`, listed
# as the endpoint "smollm2-serve" for sampling runs and judges: a real OpenAI-compatible server on the CPU.
if [ "${SERVE:-0}" = 1 ]; then
  SERVE_PORT="${SERVE_PORT:-8001}"
  folder=$($PY manage.py shell -v 0 -c "from django.conf import settings; from training.runs.store import \
converted_smollm2; print(converted_smollm2(settings.MODEL_STORE_DIR))")
  HF_HUB_OFFLINE=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/transformers serve "$folder" --host 127.0.0.1 --port "$SERVE_PORT" \
    --device cpu >var/transformers-serve.log 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null || true' EXIT
  export SAMPLING_ENDPOINTS="{\"smollm2-serve\": {\"base_url\": \"http://127.0.0.1:${SERVE_PORT}/v1\", \
\"model\": \"$folder\", \"server\": \"transformers\", \"policy\": \"prompted\", \"max_parallel\": 2, \"timeout_s\": 300}}"
fi
# Real worker processes; with no CELERY_BROKER_URL they use the embedded broker in var/. Training and
# sampling get a worker each (one job at a time, passive OpenMP threads) so that a long run never holds up
# exports.
.venv/bin/celery -A webgpt_site worker -n jobs@%h -Q default,exports --concurrency 1 --loglevel INFO \
  >var/celery-worker.log 2>&1 &
workers=$!
OMP_WAIT_POLICY=PASSIVE .venv/bin/celery -A webgpt_site worker -n training@%h -Q training --concurrency 1 \
  --loglevel INFO >var/celery-training.log 2>&1 &
workers="$workers $!"
OMP_WAIT_POLICY=PASSIVE .venv/bin/celery -A webgpt_site worker -n sampling@%h -Q sampling --concurrency 1 \
  --loglevel INFO >var/celery-sampling.log 2>&1 &
workers="$workers $!"
workers="$workers ${server:-}"
trap 'kill $workers 2>/dev/null || true; wait $workers 2>/dev/null || true' EXIT INT TERM

cat <<BANNER

  WebGPT feedback platform: http://127.0.0.1:${PORT}/
  Demo logins (user name = password): demonstrator, labeler, researcher, admin;
  applicant (a labeler still to pass the screening test), drifter (a labeler paused by gold checks)
  Celery worker logs: var/celery-worker.log (default, exports), var/celery-training.log (training),
                      var/celery-sampling.log (sampling)

BANNER
$PY manage.py runserver "127.0.0.1:${PORT}"
