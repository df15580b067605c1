"""The host firewall rule that completes the sandbox's network isolation.

A container on a Docker ``--internal`` network has no route out, but it can still open
connections to the HOST itself through its bridge's gateway address, i.e. reach every host
service that listens on 0.0.0.0 (or on [::] through IPv6 link-local). Every sandbox bridge is
named ``lpsb<hex>``, so one rule per family drops all of it::

    iptables  -I INPUT -i lpsb+ -j DROP
    ip6tables -I INPUT -i lpsb+ -j DROP

Traffic between the two containers of a sandbox is bridged (FORWARD), so it is unaffected.
"""

from __future__ import annotations

import logging
import shutil
import subprocess

from liberopro_platform.sandbox.base import SandboxError

log = logging.getLogger("liberopro_platform.firewall")

BRIDGE_PREFIX = "lpsb"
RULE = ["INPUT", "-i", f"{BRIDGE_PREFIX}+", "-j", "DROP"]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=False, capture_output=True, text=True, timeout=30)


def rule_present(tool: str = "iptables") -> bool:
    """True when ``tool`` (iptables or ip6tables) already has the rule."""
    return shutil.which(tool) is not None and _run([tool, "-w", "-C", *RULE]).returncode == 0


def install() -> list[str]:
    """Install the rule for IPv4 (required) and IPv6 (when ip6tables exists); returns what was
    added. Raises :class:`SandboxError` saying how to fix it when IPv4 cannot be covered."""
    added = []
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            if tool == "iptables":
                raise SandboxError("iptables is not installed, so sandboxed policies could reach host "
                                   "services on 0.0.0.0: install it (apt-get install iptables)")
            continue
        if _run([tool, "-w", "-C", *RULE]).returncode == 0:
            continue
        res = _run([tool, "-w", "-I", *RULE])
        if res.returncode != 0:
            if tool == "ip6tables":
                log.warning("could not add the IPv6 sandbox rule (%s); IPv4 is covered", res.stderr.strip())
                continue
            raise SandboxError(
                f"could not install the sandbox firewall rule ({res.stderr.strip()}): without it a "
                "sandboxed policy can reach host services listening on 0.0.0.0. Fix: run the worker "
                "as root in the host's network namespace, or add the rule yourself "
                f"(`iptables -I {' '.join(RULE)}`) and set LIBEROPRO_SANDBOX_FIREWALL=external")
        added.append(tool)
    if added:
        log.info("sandbox firewall rule installed (%s)", ", ".join(added))
    return added


def ensure(mode: str) -> None:
    """Apply ``mode``: ``auto`` installs the rule, ``external`` trusts the host to have it (and
    checks when it can), ``off`` does nothing (development only)."""
    if mode == "auto":
        install()
    elif mode == "external":
        if shutil.which("iptables") and not rule_present():
            log.warning("LIBEROPRO_SANDBOX_FIREWALL=external but this namespace shows no rule; the host "
                        "must have: iptables -I %s", " ".join(RULE))
    elif mode != "off":
        raise ValueError(f"unknown sandbox_firewall mode {mode!r} (auto, external, off)")


def main() -> int:
    """``python -m liberopro_platform.sandbox.firewall``: install the rule (compose's one-shot
    ``sandbox-firewall`` service runs this in the host's network namespace)."""
    logging.basicConfig(level=logging.INFO)
    try:
        added = install()
    except SandboxError as exc:
        print(f"error: {exc}")
        return 1
    print("sandbox firewall rule " + ("installed: " + ", ".join(added) if added else "already present"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
