"""LIBERO-Pro2.0 evaluator: tasks, split, shift catalog, instances, the episode runner on
LIBERO/MuJoCo, metrics, and the ``liberopro`` CLI."""

__version__ = "0.1.0"
EVALUATOR_VERSION = __version__
