#!/usr/bin/env bash
# Installs what LIBERO-Pro2.0 needs from the OS on a fresh Debian/Ubuntu machine, and uv.
# Usage: scripts/setup-system.sh [--with-test-deps]
#   always: Mesa EGL (headless MuJoCo rendering on the CPU), curl, git, uv (review MP4s use the
#           ffmpeg that the imageio-ffmpeg wheel bundles)
#   --with-test-deps: also the Docker engine (docker.io), Compose v1 (docker-compose), debootstrap, Chromium (browser tests)
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

base_pkgs=(libegl1 libegl-mesa0 libgl1-mesa-dri libglib2.0-0 ca-certificates curl git)
test_pkgs=(docker.io docker-compose debootstrap chromium iptables redis-server postgresql)

want=("${base_pkgs[@]}")
if [ "${1:-}" = "--with-test-deps" ]; then want+=("${test_pkgs[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing OS packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v uv >/dev/null 2>&1; then
  echo "installing uv"
  if command -v pip >/dev/null 2>&1; then
    pip install -q uv || python3 -m pip install -q --break-system-packages uv
  else
    curl -LsSf https://astral.sh/uv/install.sh | sh
    export PATH="$HOME/.local/bin:$PATH"
  fi
fi
