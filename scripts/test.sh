#!/usr/bin/env bash
# `make test`: the whole suite against PostgreSQL and Redis (and Chromium for the end-to-end tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-services.sh

export DEBUG=1
export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/webgpt}"
# Runs may share this Redis database: each run's broker keys carry a prefix of its own (tests/conftest.py)
# and tests empty only their run's keys, never the database.
export CELERY_BROKER_URL="${TEST_CELERY_BROKER_URL:-redis://127.0.0.1:6379/15}"

# The same hypothesis examples at every run (tests/conftest.py): a failure here fails the next run too.
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"

.venv/bin/ruff check .
.venv/bin/python scripts/check_imports.py  # no import cycle, none up a floor (docs/architecture.md)
# One xdist worker per core (two here); tests that start workers, servers or Chromium keep to their groups
# (pyproject.toml: --dist loadgroup). PYTEST_WORKERS=0 runs everything in this process.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-auto}" "$@"
