# The LIBERO-Pro2.0 platform: API (uvicorn) and workers (Celery) from one image, without the
# simulator (workers run the evaluator in its own container through the Docker engine).
#   api:    python -m liberopro_platform api
#   worker: python -m liberopro_platform worker
# Built offline by docker/build-images.sh (context: wheelhouse/ = the platform's wheels).
ARG BASE_IMAGE=liberopro/base-python:bookworm

FROM ${BASE_IMAGE} AS build
COPY wheelhouse/ /wheelhouse/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse \
      fastapi uvicorn sqlalchemy alembic 'celery[redis]' docker 'psycopg[binary]' pydantic-settings \
      python-multipart httpx typer rich msgpack pydantic numpy \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --no-deps /wheelhouse/liberopro_submission_spec-*.whl /wheelhouse/liberopro-*.whl \
 && /opt/venv/bin/pip uninstall -y -q pip

FROM ${BASE_IMAGE}
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 LIBEROPRO_DATA_DIR=/data
RUN mkdir -p /data && chown 10001:10001 /data \
 && (useradd --uid 10001 --no-create-home --home-dir /data platform 2>/dev/null \
     || echo 'platform:x:10001:10001::/data:/usr/sbin/nologin' >> /etc/passwd)
USER 10001:10001
WORKDIR /data
EXPOSE 8000
CMD ["python", "-m", "liberopro_platform", "api", "--host", "0.0.0.0", "--port", "8000"]
