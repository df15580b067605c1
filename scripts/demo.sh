#!/usr/bin/env bash
# README command (a): set everything up on a fresh Debian/Ubuntu machine and run the main job on
# its embedded defaults: the example "zero" policy, served over the submission spec, evaluated on
# real LIBERO scenes (nominal, two static and two runtime shifts); prints the summary table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
export PATH="$HOME/.local/bin:$PATH"
uv sync --frozen
exec uv run --frozen liberopro demo "$@"
