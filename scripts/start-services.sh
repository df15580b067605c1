#!/usr/bin/env bash
# Starts what the tests talk to, when it is not already running: Redis and PostgreSQL (on our
# machines they run already), and the Docker engine (no systemd here: dockerd in the background).
set -euo pipefail

if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  else
    echo "Redis is not running and not installed: install redis-server" >&2; exit 1
  fi
fi

if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  else
    echo "PostgreSQL is not running and not installed: install postgresql" >&2; exit 1
  fi
fi

bash "$(dirname "$0")/start-dockerd.sh"
echo "services: redis, postgresql and docker are up"
