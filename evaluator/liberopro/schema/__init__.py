"""The data contracts of LIBERO-Pro2.0 as typed pydantic models, light enough for any reader.

Modules here import no simulator (no robosuite, mujoco, libero or cv2; a test checks it), so
that the platform, whose image has none of them, reads exactly the models the evaluator writes:

* :mod:`liberopro.schema.manifest`: instance manifests (the header and one
  :class:`~liberopro.schema.manifest.Instance` per line), their reader, writer and checks.
* :mod:`liberopro.schema.results`: results (``episodes.jsonl`` records, ``summary.json``, the run
  header) and the evaluator's events, versioned by ``RESULTS_SCHEMA_VERSION``
  (``docs/results.md``; JSON Schema in ``docs/results.schema.json``).
* :mod:`liberopro.schema.shard`: the shard contract with the platform (the shard file, the
  validation check's limits, the ``LIBEROPRO-EVENT`` stdout lines of :mod:`liberopro.runs.shard`) and
  the one rule for a shard's simulator streams (``shard_streams``).
* :mod:`liberopro.schema.reasons`: why an episode ended and which side is charged with it.
"""
