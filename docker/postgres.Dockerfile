# PostgreSQL for the platform stack (compose's `postgres`), from Debian 12's postgresql-15
# package instead of the registry's postgres image, so that the stack comes up offline. Built by
# docker/build-images.sh (`postgres`) FROM liberopro/base-postgres:bookworm, a debootstrap
# rootfs holding postgresql-15 and its client (psql, pg_isready).
#
# The same interface as the registry image, for what compose.yaml uses:
#   POSTGRES_PASSWORD (required on the first start), POSTGRES_USER (default postgres),
#   POSTGRES_DB (default POSTGRES_USER), PGDATA (default /var/lib/postgresql/data).
# On its first start (no PG_VERSION in PGDATA) the entrypoint runs initdb with scram-sha-256
# password authentication for every connection (socket and TCP, from any address: never
# trust), creates POSTGRES_DB, then serves on 0.0.0.0:5432 as the `postgres` user.
ARG BASE_IMAGE=liberopro/base-postgres:bookworm
FROM ${BASE_IMAGE}
ARG PG_MAJOR=15
ENV PG_MAJOR=${PG_MAJOR} PATH=/usr/lib/postgresql/${PG_MAJOR}/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/liberopro-postgres-entrypoint
RUN chmod 0755 /usr/local/bin/liberopro-postgres-entrypoint \
 && command -v postgres && command -v initdb && command -v pg_isready && command -v psql && id postgres \
 && mkdir -p "$PGDATA" /run/postgresql \
 && chown postgres:postgres "$PGDATA" /run/postgresql && chmod 0700 "$PGDATA" && chmod 2775 /run/postgresql
EXPOSE 5432
# SIGINT: PostgreSQL's fast shutdown (SIGTERM would wait for every client to disconnect).
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/liberopro-postgres-entrypoint"]
CMD ["postgres"]
