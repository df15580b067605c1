# A hostile policy image that declares VOLUMEs (Docker would give each an anonymous, unbounded
# volume on the host's disk, writable despite --read-only) and fills them: BEHAVIOR=volume of
# hostile.py. Built FROM the example policy image (the spec SDK is already there).
ARG BASE_IMAGE=liberopro/example-zero:latest
FROM ${BASE_IMAGE}
COPY hostile.py /app/hostile.py
ENV BEHAVIOR=volume WRITE_PATHS="/data /var/cache/policy /dev/shm /app" WRITE_CAP_MIB=256
VOLUME ["/data", "/var/cache/policy"]
LABEL org.liberopro.protocol=liberopro
CMD ["python", "/app/hostile.py"]
