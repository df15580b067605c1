# A fake platform image for the takeover tests: its `docker save` archive is given the tag
# liberopro/evaluator:latest (or liberopro/platform:latest) and uploaded as a submission. Before
# issue 9 `docker load` applied that tag and the fake evaluator then received the hidden shard.
ARG BASE_IMAGE=liberopro/base-python:bookworm
FROM ${BASE_IMAGE}
LABEL org.liberopro.protocol=liberopro
CMD ["python3", "-c", "print('FAKE EVALUATOR: would read /shard/shard.json and forge results'); raise SystemExit(3)"]
