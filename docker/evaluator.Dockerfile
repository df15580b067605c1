# The LIBERO-Pro2.0 evaluator: the pinned simulation stack (MuJoCo on Mesa EGL), the evaluator
# and the platform's evaluator entry point. Runs inside a sandbox next to a policy container:
#   python -m liberopro_platform.evaluator_entry check URL CHECK_JSON | run URL SHARD_JSON
# Built offline by docker/build-images.sh (context: wheelhouse/ = every locked wheel + ours).
# BASE_IMAGE needs python3, venv, libgl1 libegl1 libegl-mesa0 libgl1-mesa-dri libglib2.0-0.
ARG BASE_IMAGE=liberopro/base-sim:bookworm

FROM ${BASE_IMAGE} AS build
COPY wheelhouse/ /wheelhouse/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse -r /wheelhouse/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --no-deps /wheelhouse/liberopro_submission_spec-*.whl /wheelhouse/liberopro-*.whl \
 && /opt/venv/bin/pip uninstall -y -q pip

FROM ${BASE_IMAGE}
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 MUJOCO_GL=egl PYOPENGL_PLATFORM=egl HOME=/tmp
RUN useradd --uid 10001 --no-create-home --home-dir /tmp evaluator 2>/dev/null \
 || echo 'evaluator:x:10001:10001::/tmp:/usr/sbin/nologin' >> /etc/passwd
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["python", "-m", "liberopro_platform.evaluator_entry"]
