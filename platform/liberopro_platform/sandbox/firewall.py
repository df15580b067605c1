"""The host firewall rule that completes the sandbox's network isolation.

A container on a Docker ``--internal`` network is not forwarded anywhere (Docker's isolation
rules), but its default route still points at its bridge's gateway, which is the HOST: it can
open connections to every host service that listens on 0.0.0.0 (or on [::] through IPv6
link-local). Every sandbox bridge is named ``lpsb<hex>``, so two rules per family close it,
whatever the host's FORWARD policy::

    iptables  -I INPUT   -i lpsb+ -j DROP             # nothing to the host itself
    iptables  -I FORWARD -i lpsb+ ! -o lpsb+ -j DROP  # nothing routed elsewhere
    (the same with ip6tables)

Traffic between the two containers of a sandbox stays on its bridge, so it is unaffected.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable

from liberopro_platform.sandbox.base import SandboxError

log = logging.getLogger("liberopro_platform.firewall")

BRIDGE_PREFIX = "lpsb"
RULES = (
    ["INPUT", "-i", f"{BRIDGE_PREFIX}+", "-j", "DROP"],
    ["FORWARD", "-i", f"{BRIDGE_PREFIX}+", "!", "-o", f"{BRIDGE_PREFIX}+", "-j", "DROP"],
)
RULE = RULES[0]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=False, capture_output=True, text=True, timeout=30)


def rule_present(tool: str = "iptables") -> bool:
    """True when ``tool`` (iptables or ip6tables) already has every rule."""
    return shutil.which(tool) is not None and all(_run([tool, "-w", "-C", *r]).returncode == 0 for r in RULES)


def install() -> list[str]:
    """Install the rule for IPv4 (required) and IPv6 (when ip6tables exists); returns what was
    added. Raises :class:`SandboxError` saying how to fix it when IPv4 cannot be covered."""
    added = []
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            if tool == "iptables":
                raise SandboxError(
                    "iptables is not installed, so sandboxed policies could reach host "
                    "services on 0.0.0.0: install it (apt-get install iptables)"
                )
            continue
        for rule in RULES:
            if _run([tool, "-w", "-C", *rule]).returncode == 0:
                continue
            res = _run([tool, "-w", "-I", *rule])
            if res.returncode != 0:
                if tool == "ip6tables":
                    log.warning("could not add the IPv6 sandbox rule (%s); IPv4 is covered", res.stderr.strip())
                    break
                raise SandboxError(
                    f"could not install the sandbox firewall rule ({res.stderr.strip()}): without it a "
                    "sandboxed policy can reach host services listening on 0.0.0.0. Fix: run the worker "
                    "as root in the host's network namespace, or add the rules yourself "
                    f"(`iptables -I {' '.join(RULES[0])}` and `iptables -I {' '.join(RULES[1])}`) and set "
                    "LIBEROPRO_SANDBOX_FIREWALL=external"
                )
            added.append(f"{tool} {rule[0]}")
    if added:
        log.info("sandbox firewall rule installed (%s)", ", ".join(added))
    return added


def ensure(mode: str, host_has_rules: Callable[[], bool | None] | None = None) -> None:
    """Apply ``mode``: ``auto`` installs the rule, ``external`` trusts the host to have it and
    checks when it can, ``off`` does nothing (development only).

    ``external`` is the worker in a container of its own (compose): its network namespace is not
    the host's, where the rules live, so its own iptables says nothing about them. The check asks
    ``host_has_rules`` (the Docker backend runs ``--check`` in the host's namespace; None: it
    could not tell) and, without it, this namespace only when it is the host's. It warns only
    when a check saw the rules missing."""
    if mode == "auto":
        install()
    elif mode == "external":
        present = host_has_rules() if host_has_rules is not None else None
        if present is None and shutil.which("iptables") and _in_host_namespace():
            present = rule_present()
        if present is False:
            log.warning(
                "LIBEROPRO_SANDBOX_FIREWALL=external but the host lacks the sandbox rules; install them "
                "(compose's sandbox-firewall service, or: iptables -I %s; iptables -I %s)",
                " ".join(RULES[0]),
                " ".join(RULES[1]),
            )
        elif present is None:
            log.info("LIBEROPRO_SANDBOX_FIREWALL=external: the host's rules could not be checked from here")
    elif mode != "off":
        raise ValueError(f"unknown sandbox_firewall mode {mode!r} (auto, external, off)")


def _in_host_namespace() -> bool:
    """True when this process shares the network namespace of PID 1 of the machine it sees
    (false inside a container with its own network, where PID 1 is the container's)."""
    import os

    try:
        return os.readlink("/proc/self/ns/net") == os.readlink("/proc/1/ns/net") and not os.path.exists("/.dockerenv")
    except OSError:
        return False


def run(check: bool = False) -> int:
    """Install the rule (compose's one-shot ``sandbox-firewall`` service runs this in the host's
    network namespace) and return the exit code: 0 installed or already present, 1 when it could
    not be installed. ``check``: install nothing; 0 when every IPv4 rule is present, 3 when one is
    missing (what a worker with ``external`` asks the engine to run there)."""
    if check:
        present = rule_present("iptables")
        print("sandbox firewall rules " + ("present" if present else "missing"))
        return 0 if present else 3
    logging.basicConfig(level=logging.INFO)
    try:
        added = install()
    except SandboxError as exc:
        print(f"error: {exc}")
        return 1
    print("sandbox firewall rule " + ("installed: " + ", ".join(added) if added else "already present"))
    return 0


def main(argv: list[str] | None = None) -> None:
    """``python -m liberopro_platform.sandbox.firewall [--check]``: :func:`run` with the command
    line ``argv`` (default: ``sys.argv``); exits with its code."""
    import typer

    def firewall(
        check: bool = typer.Option(
            False, "--check", help="Install nothing; exit 0 when the rules are present, 3 if not."
        ),
    ) -> None:
        raise typer.Exit(run(check))

    app = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.command(help="Install the host rule that stops sandboxed policies from reaching host services.")(firewall)
    app(args=argv, prog_name="python -m liberopro_platform.sandbox.firewall")


if __name__ == "__main__":
    main()
