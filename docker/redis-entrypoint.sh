#!/bin/sh
# Entrypoint of liberopro/redis (docker/redis.Dockerfile). Started as root: hands /data to the
# redis user and re-executes itself as that user; then runs the command (redis-server with the
# given arguments, or any other command such as redis-cli).
set -eu

if [ "${1#-}" != "$1" ]; then  # `docker run liberopro/redis --appendonly yes`
  set -- redis-server "$@"
fi

if [ "$1" = "redis-server" ]; then
  if [ "$(id -u)" = "0" ]; then
    # A bind-mounted /data may belong to someone else; a named volume already belongs to redis.
    find . \! -user redis -exec chown redis:redis '{}' + 2>/dev/null || true
    exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
  fi
  # Without a config file Redis 7 listens on every interface in protected mode, which refuses
  # every client that does not come from loopback: the registry image turns it off, and so do
  # we (only the platform's containers reach this server). A config file keeps its own setting.
  case "${2:-}" in
    ""|-*)
      case " $* " in
        *" --protected-mode "*) ;;
        *) set -- "$@" --protected-mode no ;;
      esac ;;
  esac
fi

exec "$@"
