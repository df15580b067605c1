#!/bin/bash
# Entrypoint of liberopro/postgres (docker/postgres.Dockerfile).
#   1. as root: make PGDATA and the socket directory the postgres user's, then re-execute itself
#      as that user (the server never runs as root);
#   2. first start only (no PGDATA/PG_VERSION): initdb with scram-sha-256 for every connection,
#      the superuser POSTGRES_USER with POSTGRES_PASSWORD, listen on every address of the
#      container, create POSTGRES_DB;
#   3. exec the server. Any other command (psql, pg_isready, bash) runs as given.
set -euo pipefail

if [ "${1#-}" != "$1" ]; then  # `docker run liberopro/postgres -c shared_buffers=256MB`
  set -- postgres "$@"
fi
if [ "$1" != "postgres" ]; then
  exec "$@"
fi

if [ "$(id -u)" = "0" ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown postgres:postgres /run/postgresql
  chmod 2775 /run/postgresql
  # A named volume takes the image's ownership; a bind mount may belong to someone else.
  if [ "$(stat -c %U "$PGDATA")" != "postgres" ]; then
    chown -R postgres:postgres "$PGDATA"
  fi
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

log() { echo "liberopro-postgres: $*" >&2; }

if [ -s "$PGDATA/PG_VERSION" ]; then
  have="$(cat "$PGDATA/PG_VERSION")"
  if [ "$have" != "$PG_MAJOR" ]; then
    log "error: $PGDATA holds a PostgreSQL $have cluster but this image runs PostgreSQL $PG_MAJOR" \
        "(Debian 12's). Run it with an image of PostgreSQL $have (POSTGRES_IMAGE=...), or dump it" \
        "with that version (pg_dumpall) and restore into a fresh volume."
    exit 1
  fi
  log "database directory $PGDATA exists: skipping initialisation"
else
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    log "error: the database is not initialised and POSTGRES_PASSWORD is empty. Set POSTGRES_PASSWORD" \
        "(the password of POSTGRES_USER; connections always need it: scram-sha-256, never trust)."
    exit 1
  fi
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-$user}"
  log "initialising $PGDATA (superuser $user, database $db, scram-sha-256)"
  pwfile="$(mktemp)"
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --auth=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  # initdb allows TCP from loopback only; the platform's containers connect over compose's network.
  printf '\n# liberopro/postgres: every address, with a password\nhost all all all scram-sha-256\n' \
    >>"$PGDATA/pg_hba.conf"
  printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  if [ "$db" != "postgres" ]; then
    # A server on a private socket only: neither clients nor `pg_isready` (compose's healthcheck,
    # which uses the default socket) see a server before the database exists.
    initsock="$(mktemp -d)"
    trap 'rm -f "$pwfile"; rm -rf "$initsock"' EXIT
    pg_ctl --pgdata="$PGDATA" --wait --silent \
      -o "-c listen_addresses='' -c unix_socket_directories=$initsock" start
    PGPASSWORD="$POSTGRES_PASSWORD" psql --no-psqlrc --quiet -v ON_ERROR_STOP=1 -h "$initsock" \
      -U "$user" -d postgres -v db="$db" <<'SQL'
CREATE DATABASE :"db";
SQL
    pg_ctl --pgdata="$PGDATA" --wait --silent -m fast stop
    rm -rf "$initsock"
  fi
  log "initialised"
fi

exec "$@"
