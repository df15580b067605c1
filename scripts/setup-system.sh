#!/usr/bin/env bash
# Installs what LIBERO-Pro2.0 needs from the OS on a fresh Debian/Ubuntu machine, and uv.
# Usage: scripts/setup-system.sh [--with-test-deps]
#   always: Mesa EGL (headless MuJoCo rendering on the CPU), curl, git, uv (review MP4s use the
#           ffmpeg that the imageio-ffmpeg wheel bundles)
#   --with-test-deps: also the Docker engine and Compose (below), debootstrap, iptables, Chromium
#           (browser tests), Redis and PostgreSQL (test servers)
#
# The Docker engine: the newest one an apt source offers, decided from `apt-cache policy`:
#   - docker-ce + docker-compose-plugin when an apt source offers docker-ce (Docker's own
#     repository, added by the administrator: https://docs.docker.com/engine/install/debian/);
#   - else the distribution's docker.io with its Compose: docker-compose-v2 where offered
#     (Ubuntu), else docker-compose (Debian 12: Docker 20.10 with Compose v1 1.29; Debian 13:
#     Docker 26.1 with Compose 2.26).
# An engine that is already installed is kept (replacing it restarts dockerd and stops every
# container); the script says when apt offers a newer one. docs/platform.md says what an engine
# older than 26 risks.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

base_pkgs=(libegl1 libegl-mesa0 libgl1-mesa-dri libglib2.0-0 ca-certificates curl git)
test_pkgs=(debootstrap chromium iptables redis-server postgresql)

candidate() {  # PACKAGE -> the version apt would install, or nothing
  apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" {print $2}'
}

docker_pkgs() {  # the engine and Compose packages to install (apt lists must be fresh)
  if [ -n "$(candidate docker-ce)" ]; then
    echo docker-ce docker-ce-cli containerd.io docker-compose-plugin
  elif [ -n "$(candidate docker-compose-v2)" ]; then
    echo docker.io docker-compose-v2
  else
    echo docker.io docker-compose
  fi
}

compose_pkg() {  # Compose for the engine that is installed
  if dpkg -s docker-ce >/dev/null 2>&1; then echo docker-compose-plugin
  elif [ -n "$(candidate docker-compose-v2)" ]; then echo docker-compose-v2
  else echo docker-compose; fi
}

want=("${base_pkgs[@]}")
engine_missing="" compose_missing=""
if [ "${1:-}" = "--with-test-deps" ]; then
  want+=("${test_pkgs[@]}")
  if ! command -v dockerd >/dev/null 2>&1; then
    engine_missing=1
  elif ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
    compose_missing=1
  fi
fi

missing=()
for p in "${want[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ] || [ -n "$engine_missing$compose_missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  if [ -n "$engine_missing" ]; then
    read -r -a engine <<<"$(docker_pkgs)"
    echo "Docker engine: ${engine[*]} (docker-ce $(candidate docker-ce || true), docker.io $(candidate docker.io || true) offered)"
    missing+=("${engine[@]}")
  fi
  if [ -n "$compose_missing" ]; then missing+=("$(compose_pkg)"); fi
  echo "installing OS packages: ${missing[*]}"
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--with-test-deps" ] && command -v dockerd >/dev/null 2>&1; then
  have="$(dockerd --version 2>/dev/null | sed -E 's/^Docker version ([0-9][0-9.]*).*/\1/')"
  if [ "${have%%.*}" -lt 26 ] 2>/dev/null; then
    newer="$(candidate docker-ce)"; [ -n "$newer" ] && newer="docker-ce $newer" || newer="docker.io $(candidate docker.io)"
    echo "note: Docker engine $have (< 26; apt offers $newer): it works, but see docs/platform.md" \
         "(\"Docker versions\") for what an older engine risks."
  fi
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
