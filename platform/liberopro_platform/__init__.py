"""LIBERO-Pro2.0 platform: submissions API, queue, sandboxed evaluation (issue 4).

Modules: :mod:`.config` (settings), :mod:`.models` (tables), :mod:`.db`, :mod:`.security`
(tokens), :mod:`.api` (FastAPI), :mod:`.pipeline` (the stages as plain functions),
:mod:`.celery_app` (Celery app and tasks), :mod:`.sandbox` (Docker and local backends; what runs
in the evaluator container is the evaluator's :mod:`liberopro.cli.shard`), :mod:`.planning` (the
hidden manifest, shards), :mod:`.submitter_cli` (``liberopro submit``, ``status``, ``cancel``)
and :mod:`.admin_cli` (``python -m liberopro_platform``).
"""

__version__ = "0.1.0"
