#!/usr/bin/env bash
# README command (b): set everything up on a fresh Debian/Ubuntu machine and run the test suite
# on real components (LIBERO/MuJoCo, Redis, PostgreSQL, the Docker engine, Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh --with-test-deps
export PATH="$HOME/.local/bin:$PATH"
uv sync --frozen
bash scripts/start-services.sh
# Every image the platform tests run (offline: base images from Debian packages, a local wheelhouse).
bash docker/build-images.sh all
exec uv run --frozen pytest "$@"
