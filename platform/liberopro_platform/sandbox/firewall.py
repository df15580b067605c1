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


def ensure(mode: str) -> None:
    """Apply ``mode``: ``auto`` installs the rule, ``external`` trusts the host to have it (and
    checks when it can), ``off`` does nothing (development only)."""
    if mode == "auto":
        install()
    elif mode == "external":
        if shutil.which("iptables") and not rule_present():
            log.warning(
                "LIBEROPRO_SANDBOX_FIREWALL=external but this namespace lacks the rules; the host "
                "must have: iptables -I %s; iptables -I %s",
                " ".join(RULES[0]),
                " ".join(RULES[1]),
            )
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
