# The pagecache hostile image: hostile.py with BEHAVIOR=pagecache and an 8 MiB file owned by the
# policy's user (mincore(2) reports the page-cache residency of a file its caller may write), as a
# submitter's image can hold. Built FROM the example policy image.
ARG BASE_IMAGE=liberopro/example-zero:latest
FROM ${BASE_IMAGE}
USER 0:0
COPY hostile.py /app/hostile.py
RUN python3 -c "import os; open('/blob', 'wb').write(os.urandom(8 * 2**20))" && chown 65534:65534 /blob
USER 65534:65534
ENV BEHAVIOR=pagecache
LABEL org.liberopro.protocol=liberopro
CMD ["python", "/app/hostile.py"]
