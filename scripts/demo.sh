#!/usr/bin/env bash
# README command (a): set everything up on a fresh Debian/Ubuntu machine and run the main job on
# its embedded defaults: the example "zero" policy, served over the submission spec, evaluated on
# real LIBERO scenes, then the privileged oracle (a reference, never a submission) on the same cases
# (nominal and three shifts under which the oracle loses success); prints both summaries side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
export PATH="$HOME/.local/bin:$PATH"
uv sync --frozen
exec uv run --frozen liberopro demo "$@"
