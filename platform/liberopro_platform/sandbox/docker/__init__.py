"""The Docker backend's parts, one module per job; :class:`~liberopro_platform.sandbox.docker_backend.DockerBackend`
composes them (its module docstring lists them)."""
