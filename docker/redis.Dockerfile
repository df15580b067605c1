# Redis for the platform stack (compose's `redis`: the Celery broker), from Debian 12's
# redis-server package (Redis 7.0) instead of the registry's redis:7-bookworm, so that the stack
# comes up offline. Built by docker/build-images.sh (`redis`) FROM liberopro/base-redis:bookworm,
# a debootstrap rootfs holding redis-server and redis-tools (redis-cli).
#
#   docker run liberopro/redis redis-server --appendonly yes      # what compose.yaml runs
#
# Like the registry image: the working directory (Redis' `dir`, where the AOF/RDB files go) is
# /data, the server runs as the `redis` user (the entrypoint starts as root only to hand /data
# to it), and protected mode is off when no config file is given (the server sits on compose's
# internal network, reachable only by the platform's containers).
ARG BASE_IMAGE=liberopro/base-redis:bookworm
FROM ${BASE_IMAGE}
COPY redis-entrypoint.sh /usr/local/bin/liberopro-redis-entrypoint
RUN chmod 0755 /usr/local/bin/liberopro-redis-entrypoint \
 && command -v redis-server && command -v redis-cli && id redis \
 && mkdir -p /data && chown redis:redis /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/liberopro-redis-entrypoint"]
CMD ["redis-server"]
