#!/usr/bin/env bash
# README command (b): set everything up on a fresh Debian/Ubuntu machine and run the test suite
# on real components (LIBERO/MuJoCo, Redis, PostgreSQL, the Docker engine, Chromium).
#
#   bash scripts/test.sh                 # setup, lint, then every tier (what .ci/run does)
#   bash scripts/test.sh tests/x.py -k y # setup, then pytest with these arguments only
#
# Tiers (markers in pyproject.toml): the fast tier (no simulator, services, Docker or browser) runs
# first on two pytest-xdist workers; the sim, services, docker and browser tiers run after it in one
# process (they share Redis, PostgreSQL and the Docker engine). Each phase's duration is printed at
# the end, failed or not.
set -euo pipefail
cd "$(dirname "$0")/.."

PHASES=()
phase() {  # phase NAME CMD...: run CMD, record how long it took
    local name=$1 t0=$SECONDS rc=0
    shift
    echo "== phase: $name"
    "$@" || rc=$?
    PHASES+=("$(printf '%-34s %5d s%s' "$name" $((SECONDS - t0)) "$([ $rc -eq 0 ] || echo "  (failed, exit $rc)")")")
    return $rc
}
report() {
    echo "== phase durations"
    printf '   %s\n' "${PHASES[@]}"
    printf '   %-34s %5d s\n' "total" "$SECONDS"
}
trap report EXIT

phase "system packages, Docker, Chromium" bash scripts/setup-system.sh --with-test-deps
export PATH="$HOME/.local/bin:$PATH"
phase "python environment (uv sync)" uv sync --frozen
phase "services (Redis, PostgreSQL)" bash scripts/start-services.sh
# Every image the platform tests run (offline: base images from Debian packages, a local wheelhouse).
phase "images (docker/build-images.sh)" bash docker/build-images.sh all

if [ $# -gt 0 ]; then
    phase "pytest $*" uv run --frozen pytest "$@"
    exit
fi
# Lint and both test phases always run (a failure in one still shows the others'); the exit
# status is the first failure's.
failed=0
keep() { local rc=$?; [ "$failed" -ne 0 ] || failed=$rc; }
phase "lint (ruff check; C901 <= 15)" uv run --frozen ruff check . || keep
phase "lint (functions <= 100 lines)" uv run --frozen python scripts/check_function_length.py || keep
phase "format (ruff format --check)" uv run --frozen ruff format --check . || keep
phase "layering (lint-imports)" uv run --frozen lint-imports || keep
phase "types (mypy: all five members)" uv run --frozen mypy || keep
# The lerobot tier (the real lerobot, in its own venv: it reads a dataset, docs/demos.md, and
# lerobot-eval runs an instance, docs/integrations.md) and the
# vlaeval tier (allenai's vla-eval runs an instance: the vlaeval extra, docs/integrations.md) are
# opt-in and deselected here, not skipped.
FAST='not sim and not services and not docker and not browser and not lerobot and not vlaeval'
phase "tests: fast tier (2 workers)" uv run --frozen pytest -m "$FAST" -n 2 --dist worksteal || keep
phase "tests: sim, services, docker, browser" uv run --frozen pytest -m "not ($FAST) and not lerobot and not vlaeval" || keep
exit "$failed"
