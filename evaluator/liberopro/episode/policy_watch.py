"""Stop a ``--policy-cmd`` server whose evaluator died without stopping it (``kill -9``, the
OOM killer): ``python -m liberopro.episode.policy_watch GROUP PARENT``.

:class:`~liberopro.episode.policy_process.PolicyProcess` starts the server's shell as the leader of a
session (process group ``GROUP``) of its own, so that a Ctrl-C at the terminal reaches the evaluator
alone and the evaluator stops the server in order; a SIGTERM reaches the evaluator as Ctrl-C
(:class:`liberopro.cli.common._StopOnSignal`). A SIGKILL runs no code of the evaluator's, and the
server outlived it. This watcher, started beside the server (in a session of its own too, so that
a signal to the evaluator's group does not reach it), checks every :data:`POLL_S` seconds whether its
parent is still the evaluator ``PARENT``; once it is not (the kernel handed the watcher to init or
to a subreaper), it ends the group the way :meth:`PolicyProcess.stop
<liberopro.episode.policy_process.PolicyProcess.stop>` does: SIGTERM, then SIGKILL after
:data:`GRACE_S` seconds. It exits as soon as the group is gone (the evaluator stopped the server).

``prctl(PR_SET_PDEATHSIG)`` on the shell would not do: the kernel signals only the process it is
set on, and ``/bin/sh -c CMD`` (dash) forks the command instead of running it in its own place, so
the server itself, and whatever it started, would outlive the shell.
"""

from __future__ import annotations

import os
import signal
import sys
import time

#: Seconds between two checks of the parent (and of the group).
POLL_S = 0.25
#: Seconds between SIGTERM and SIGKILL to the server's group.
GRACE_S = 5.0


def _alive(group: int) -> bool:
    """Whether any process of process group ``group`` is left."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the group id now names another user's group: not ours any more
        return False
    return True


def end_group(group: int, grace: float = GRACE_S) -> None:
    """SIGTERM to process group ``group``, SIGKILL after ``grace`` seconds if any of it is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _alive(group):
                return
            time.sleep(0.05)


def watch(group: int, parent: int) -> None:
    """Wait while process ``parent`` is this process's parent and group ``group`` has processes;
    end the group (:func:`end_group`) when the parent goes first."""
    while _alive(group):
        if os.getppid() != parent:
            end_group(group)
            return
        time.sleep(POLL_S)


def main(argv: list[str]) -> int:
    """``GROUP PARENT`` (process ids) -> exit code (2 for bad arguments)."""
    try:
        group, parent = (int(a) for a in argv)
    except ValueError:
        print("usage: python -m liberopro.episode.policy_watch GROUP PARENT (two process ids)", file=sys.stderr)
        return 2
    watch(group, parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
