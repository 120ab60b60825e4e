#!/usr/bin/env bash
# `make run`: migrate, load the demo data, start a Celery worker and the web server on 127.0.0.1:$PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}"
PORT="${PORT:-8000}"
PY=.venv/bin/python

$PY manage.py migrate --noinput -v 0
$PY manage.py load_demo
mkdir -p var
# A real worker process on all queues; with no CELERY_BROKER_URL it uses the embedded broker in var/.
.venv/bin/celery -A webgpt_site worker -Q default,exports,training --concurrency 1 --loglevel INFO \
  >var/celery-worker.log 2>&1 &
worker=$!
trap 'kill "$worker" 2>/dev/null || true; wait "$worker" 2>/dev/null || true' EXIT INT TERM

cat <<BANNER

  WebGPT feedback platform: http://127.0.0.1:${PORT}/
  Demo logins (user name = password): demonstrator, labeler, researcher, admin
  Celery worker log: var/celery-worker.log

BANNER
$PY manage.py runserver "127.0.0.1:${PORT}"
