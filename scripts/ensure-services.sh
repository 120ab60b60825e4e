#!/usr/bin/env bash
# Make sure what the tests need is here: Debian's Chromium, PostgreSQL and Redis answering on 127.0.0.1.
# Services that are installed but down are started; nothing is started twice.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v chromium >/dev/null 2>&1; then
  echo "Installing Debian's chromium (for the end-to-end tests)..."
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "Starting PostgreSQL..."
  for version in $(ls /etc/postgresql); do
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL does not answer on 127.0.0.1:5432" >&2; exit 1; }
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "Starting Redis..."
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "Redis does not answer on 127.0.0.1:6379" >&2; exit 1; }
fi
