# The LIBERO-Pro2.0 platform: API (uvicorn) and workers (Celery) from one image, without the
# simulator (workers run the evaluator in its own container through the Docker engine).
#   api:    python -m liberopro_platform api --host 0.0.0.0
#   worker: python -m liberopro_platform worker --name worker1   (queues <queue>.shards and .control)
#   control: python -m liberopro_platform worker --name control --queues control
#   beat:   python -m liberopro_platform beat                      (the stuck sweep, in its own process)
# Built offline by docker/build-images.sh. Context: wheelhouse/ (the wheels of requirements.txt:
# `uv export --package liberopro-leaderboard` of uv.lock, so the leaderboard, the platform, the
# evaluator's light core and the spec; nothing listed by hand) and ours/ (those members' wheels).
# The image has no simulator: the methodology page reads the evaluator's light catalog
# (liberopro.catalog), and `liberopro` comes without its `sim` extra.
ARG BASE_IMAGE=liberopro/base-python:bookworm

FROM ${BASE_IMAGE} AS deps
COPY wheelhouse/ /wheelhouse/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse -r /wheelhouse/requirements.txt

FROM ${BASE_IMAGE}
COPY --from=deps /opt/venv /opt/venv
COPY ours/ /tmp/ours/
# pip checks that the locked dependencies above satisfy our wheels (no index: a missing one fails).
RUN /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /tmp/ours liberopro-leaderboard \
 && /opt/venv/bin/pip uninstall -y -q pip && rm -rf /tmp/ours \
 && mkdir -p /data && chown 10001:10001 /data \
 && (useradd --uid 10001 --no-create-home --home-dir /data platform 2>/dev/null \
     || echo 'platform:x:10001:10001::/data:/usr/sbin/nologin' >> /etc/passwd)
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 LIBEROPRO_DATA_DIR=/data
USER 10001:10001
WORKDIR /data
EXPOSE 8000
CMD ["python", "-m", "liberopro_platform", "api", "--host", "0.0.0.0", "--port", "8000"]
