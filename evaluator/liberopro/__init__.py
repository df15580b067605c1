"""LIBERO-Pro2.0 evaluator: tasks, split, shift catalog, instances, the episode runner on
LIBERO/MuJoCo, metrics, and the ``liberopro`` CLI."""

__version__ = "0.1.0"
EVALUATOR_VERSION = __version__


def _quiet_robosuite_macro_notice() -> None:
    """robosuite warns on every import that it has no private macro file (its defaults are what
    LIBERO uses, and we set none); drop those three lines, keep every other robosuite message.
    A filter on its logger (``robosuite/utils/log_utils.py``), installed before robosuite exists."""
    import logging

    def keep(record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return "macro file" not in msg and "setup_macros.py" not in msg

    logging.getLogger("robosuite_logs").addFilter(keep)


_quiet_robosuite_macro_notice()
