"""What every command of ``liberopro`` shares: the two consoles (``console``: messages on stderr;
``out``: results on stdout; piped, ``COLUMNS`` or 100 wide), the one-line failure, the renderer check, the
checked evaluation config and the SIGTERM-as-Ctrl-C guard."""

from __future__ import annotations

import os
import sys
from typing import NoReturn, TextIO

import typer
from rich.console import Console
from rich.markup import escape

from liberopro.config import EvalConfig, config_error


def _width(stream: TextIO) -> int | None:
    """A terminal's own width (rich reads it, and ``COLUMNS`` when set); piped output (CI logs,
    ``| tee``) ``COLUMNS`` when set, else 100: the tables stack their columns below 150
    (:mod:`liberopro.cli.tables`) and fit 80."""
    if stream.isatty():
        return None
    try:
        return max(40, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return 100


console = Console(stderr=True, width=_width(sys.stderr))
out = Console(width=_width(sys.stdout))


def _fail(message: str, code: int = 2) -> NoReturn:
    # unwrapped (one line stays one line in a log) and escaped (a message may quote file content)
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


class _StopOnSignal:
    """SIGTERM (a batch scheduler, ``timeout``, ``kill``) ends an evaluation the way Ctrl-C does:
    as ``KeyboardInterrupt``, so every ``with``/``finally`` on the way out runs and the policy
    server started by ``--policy-cmd`` (in a session of its own, which no signal to us reaches)
    is stopped instead of left running. ``signum``/``name``: the signal that came (SIGINT unless
    SIGTERM did). Outside the main thread it does nothing (signals are delivered there only)."""

    def __init__(self) -> None:
        import signal
        import threading

        self.signum: int = signal.SIGINT
        self.name, self._previous = "SIGINT", None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum: int, frame: object) -> None:
        self.signum, self.name = signum, "SIGTERM"
        raise KeyboardInterrupt

    def restore(self) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def _require_renderer() -> None:
    """End the command with one line saying what to set when ``MUJOCO_GL`` cannot work here
    (before anything imports mujoco, whose own failures are tracebacks or silent)."""
    from liberopro.stack import RenderingError, check_rendering

    try:
        check_rendering()
    except RenderingError as exc:
        _fail(str(exc))


def _config(**fields: object) -> EvalConfig:
    """An :class:`~liberopro.config.EvalConfig` of ``fields``; a refused one ends the command with
    the check's message (exit code 2)."""
    from pydantic import ValidationError

    try:
        return EvalConfig(**fields)
    except ValidationError as exc:
        _fail(config_error(exc))


def _init_state_list(text: str, option: str, proof_attempts: int = 1) -> list[int]:
    """``"0-9"`` or ``"0,3,5"`` -> sorted init state indices; ends the command when unreadable
    (or when ``proof_attempts``, checked here too, is below 1)."""
    if proof_attempts < 1:
        _fail(f"--proof-attempts must be at least 1 (got {proof_attempts})")
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            _fail(f"{option} takes init state indices and ranges separated by commas, e.g. 0-9 or 0,1,2 (got {text!r})")
        out.update(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    if not out:
        _fail(f"{option} names no init state (got {text!r}); e.g. 0-9")
    return sorted(out)
