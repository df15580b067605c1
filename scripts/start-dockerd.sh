#!/usr/bin/env bash
# Starts the Docker engine in the background when it is not answering yet (machines whose PID 1
# is not systemd, such as our CI). Idempotent. Log: /var/log/dockerd.log.
# Usage: scripts/start-dockerd.sh
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "dockerd is not installed: run scripts/setup-system.sh --with-test-deps (apt-get install docker.io)" >&2
  exit 1
fi
nohup dockerd >/var/log/dockerd.log 2>&1 &
for _ in $(seq 1 100); do
  if docker info >/dev/null 2>&1; then
    echo "dockerd ready"
    exit 0
  fi
  sleep 0.2
done
echo "dockerd did not answer within 20 s; see /var/log/dockerd.log" >&2
tail -20 /var/log/dockerd.log >&2 || true
exit 1
