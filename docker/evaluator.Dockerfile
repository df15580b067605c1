# The LIBERO-Pro2.0 evaluator: `liberopro[sim]` (the pinned simulation stack, MuJoCo on Mesa EGL)
# and the policy client (liberopro-submission-spec, without its server extra); its shard runner
# is the entry point. Runs inside a sandbox next to a policy container:
#   python -m liberopro.cli.shard check URL CHECK_JSON | run URL SHARD_JSON
# Built offline by docker/build-images.sh. Context: wheelhouse/ (the wheels of requirements.txt:
# `uv export --package liberopro --extra sim` of uv.lock, nothing listed by hand) and ours/ (the
# wheels of the workspace members it installs).
# BASE_IMAGE needs python3, venv, libgl1 libegl1 libegl-mesa0 libgl1-mesa-dri libglib2.0-0.
ARG BASE_IMAGE=liberopro/base-sim:bookworm

FROM ${BASE_IMAGE} AS deps
COPY wheelhouse/ /wheelhouse/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse -r /wheelhouse/requirements.txt

FROM ${BASE_IMAGE}
# The third-party stack (a cached layer while uv.lock is unchanged), then our own wheels.
COPY --from=deps /opt/venv /opt/venv
COPY ours/ /tmp/ours/
# pip checks that the locked stack above satisfies our wheels (no index: a missing one fails).
RUN /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /tmp/ours 'liberopro[sim]' \
 && /opt/venv/bin/pip uninstall -y -q pip && rm -rf /tmp/ours
# Compile robosuite's numba functions once, here (each sandbox copies this cache to its /tmp).
RUN MUJOCO_GL=egl PYOPENGL_PLATFORM=egl NUMBA_CACHE_DIR=/opt/numba-cache HOME=/tmp \
    /opt/venv/bin/python -m liberopro.cli.shard warmup >/dev/null 2>&1 \
 && chmod -R a+rX /opt/numba-cache \
 && (useradd --uid 10001 --no-create-home --home-dir /tmp evaluator 2>/dev/null \
     || echo 'evaluator:x:10001:10001::/tmp:/usr/sbin/nologin' >> /etc/passwd)
# EGL_VENDOR=nvidia (docker/build-images.sh: EVALUATOR_EGL_VENDOR=nvidia): glvnd's vendor file for
# the NVIDIA driver's EGL, whose libraries the NVIDIA container runtime mounts when the container
# asks for the `graphics` capability (the platform does: NVIDIA_DRIVER_CAPABILITIES, per GPU
# stream). Mesa's vendor file stays: without a GPU the image renders on llvmpipe as before.
ARG EGL_VENDOR=mesa
RUN case "$EGL_VENDOR" in \
      mesa) ;; \
      nvidia) mkdir -p /usr/share/glvnd/egl_vendor.d \
        && printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}\n' \
           > /usr/share/glvnd/egl_vendor.d/10_nvidia.json ;; \
      *) echo "EGL_VENDOR must be mesa or nvidia, not $EGL_VENDOR" >&2; exit 1 ;; \
    esac
LABEL org.liberopro.egl-vendor=$EGL_VENDOR
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 MUJOCO_GL=egl PYOPENGL_PLATFORM=egl HOME=/tmp \
    NUMBA_CACHE_DIR=/tmp/numba-cache LIBEROPRO_NUMBA_CACHE_SEED=/opt/numba-cache
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["python", "-m", "liberopro.cli.shard"]
