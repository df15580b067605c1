#!/usr/bin/env bash
# Docker Compose for the LIBERO-Pro2.0 stack, whichever Compose the machine has, and the stack's
# settings kept in the .env file beside compose.yaml.
#
#   bash scripts/compose.sh ARGS...            Compose with ARGS: up -d, ps, logs, exec, restart, down -v, ...
#   bash scripts/compose.sh set KEY=VALUE...   write stack settings into ./.env (one line per key)
#   bash scripts/compose.sh which              print the Compose command it would run
#
# Compose: v2 (`docker compose`) when installed, else v1 (`docker-compose`: Debian 12 packages
# only 1.29); the same arguments work with both for this stack. LIBEROPRO_COMPOSE forces one,
# e.g. LIBEROPRO_COMPOSE=docker-compose. scripts/setup-system.sh --with-test-deps installs one.
#
# The project is the current directory, as with Compose itself: run this where compose.yaml is
# (the repository root, or any directory holding a copy of compose.yaml; elsewhere it refuses
# unless -f names the file). Compose reads the .env file there by itself on every command, v1 and
# v2 alike, so a setting written by `set` holds for every later `up -d` (which recreates the
# services whose settings changed; `restart` restarts the containers as they are). A variable
# exported in the shell comes before the file.
#
# `set` replaces the key's line and keeps every other line (docker/build-images.sh writes the image
# ids into the same file the same way). It refuses, and writes nothing, when an argument is not
# KEY=VALUE, when compose.yaml does not use KEY, or when VALUE holds a character outside
# letters, digits and . _ , : / @ + % = ~ - (quotes, spaces and $ are read differently by Compose
# v1 and v2). POSTGRES_PASSWORD goes into the database URL: letters, digits and . _ ~ - only. An
# empty value gives the default. LIBEROPRO_EVAL_SEED never goes into this file: export it in the
# shell that runs `liberopro instances generate`, the only command that needs it.
set -euo pipefail

die() {
  echo "compose.sh: $*" >&2
  exit 1
}

need_compose_file() {
  [ -f compose.yaml ] || die "no compose.yaml in $PWD: run this in the directory holding compose.yaml (the repository root)"
}

compose_command() {  # sets COMPOSE (an array) to the Compose to run
  if [ -n "${LIBEROPRO_COMPOSE:-}" ]; then
    read -r -a COMPOSE <<<"$LIBEROPRO_COMPOSE"
    command -v "${COMPOSE[0]}" >/dev/null 2>&1 ||
      die "LIBEROPRO_COMPOSE=$LIBEROPRO_COMPOSE: ${COMPOSE[0]} is not installed"
  elif command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
  else
    die "no Docker Compose found (neither \`docker compose\` nor \`docker-compose\`):" \
      "bash scripts/setup-system.sh --with-test-deps installs the Docker engine and Compose"
  fi
}

set_settings() {  # KEY=VALUE...
  need_compose_file
  [ "$#" -gt 0 ] || die "usage: bash scripts/compose.sh set KEY=VALUE... (keys: the variables compose.yaml uses)"
  local known arg key value
  known="$(grep -v '^[[:space:]]*#' compose.yaml | grep -o '\${[A-Za-z_][A-Za-z0-9_]*' | cut -c3- | sort -u)"
  for arg in "$@"; do
    [[ "$arg" == *=* ]] || die "'$arg' is not KEY=VALUE"
    key="${arg%%=*}" value="${arg#*=}"
    [[ "$key" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "'$key' is not a variable name (in '$arg')"
    if [ "$key" = LIBEROPRO_EVAL_SEED ]; then
      die "LIBEROPRO_EVAL_SEED stays out of .env (and off disk): export it in the shell that runs" \
        "\`liberopro instances generate\`, the only command that needs it"
    fi
    grep -qx -- "$key" <<<"$known" ||
      die "compose.yaml does not use $key; it uses: $(echo $known)"
    [[ "$value" =~ ^[A-Za-z0-9._,:/@+%=~-]*$ ]] ||
      die "the value of $key holds a character Compose v1 and v2 read differently" \
        "(use letters, digits and . _ , : / @ + % = ~ -)"
    if [ "$key" = POSTGRES_PASSWORD ] && ! [[ "$value" =~ ^[A-Za-z0-9._~-]*$ ]]; then
      die "POSTGRES_PASSWORD goes into the database URL: use letters, digits and . _ ~ - only"
    fi
  done
  local tmp keys=()
  tmp="$(mktemp .env.XXXXXX)"
  trap 'rm -f "$tmp"' EXIT
  if [ -f .env ]; then
    cat .env >"$tmp"
    chmod --reference=.env "$tmp"
  else
    chmod 600 "$tmp"  # a new file: it may hold POSTGRES_PASSWORD
  fi
  for arg in "$@"; do
    key="${arg%%=*}"
    awk -v k="$key" 'index($0, k "=") != 1' "$tmp" >"$tmp.next"
    printf '%s\n' "$arg" >>"$tmp.next"
    cat "$tmp.next" >"$tmp"
    rm -f "$tmp.next"
    keys+=("$key")
  done
  mv -f "$tmp" .env
  trap - EXIT
  echo "set ${keys[*]} in $PWD/.env: Compose reads it on every command (the next \`up -d\` applies it)"
}

case "${1:-}" in
  set)
    shift
    set_settings "$@"
    ;;
  which)
    compose_command
    echo "${COMPOSE[*]}"
    ;;
  "")
    die "usage: bash scripts/compose.sh ARGS... (Compose's own), set KEY=VALUE..., or which"
    ;;
  *)
    compose_command
    case " $* " in
      *" -f "* | *" --file "* | *" --file="* | *" version "* | *" --version "*) ;;
      *) need_compose_file ;;
    esac
    exec "${COMPOSE[@]}" "$@"
    ;;
esac
