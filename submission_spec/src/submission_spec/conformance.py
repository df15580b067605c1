"""Conformance checker: does a running server speak submission spec v1?

Run it against a URL (``python -m submission_spec.conformance http://127.0.0.1:8000`` or
``liberopro check-policy URL``). Every check states what failed and how to fix it; the platform
shows these lines to a submitter whose image fails validation.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field

import numpy as np

from submission_spec.client import PolicyClient, PolicyError
from submission_spec.models import PROPRIO_FIELDS, PolicyMetadata
from submission_spec.policy import Observation


@dataclass
class Check:
    """One conformance check: ``ok`` with what was seen (``detail``) and, on failure, a ``hint``."""

    name: str
    ok: bool
    detail: str = ""
    hint: str = ""


@dataclass
class ConformanceReport:
    """All checks run against one server; ``ok`` when every check passed."""

    url: str
    checks: list[Check] = field(default_factory=list)
    metadata: dict | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def to_dict(self) -> dict:
        return {"url": self.url, "ok": self.ok, "metadata": self.metadata, "checks": [asdict(c) for c in self.checks]}

    def lines(self) -> list[str]:
        out = []
        for c in self.checks:
            out.append(f"[{'PASS' if c.ok else 'FAIL'}] {c.name}: {c.detail}")
            if not c.ok and c.hint:
                out.append(f"       fix: {c.hint}")
        return out


def synthetic_observation(meta: PolicyMetadata, episode_id: str, step: int, rng: np.random.Generator) -> Observation:
    """An observation with the cameras, sizes and state fields ``meta`` asks for (random pixels,
    plausible proprioception)."""
    images: dict[str, np.ndarray] = {
        c.name: rng.integers(0, 256, size=(c.height, c.width, 3), dtype=np.uint8) for c in meta.cameras
    }
    proprio: dict[str, np.ndarray] = {name: np.zeros(PROPRIO_FIELDS[name][0]) for name in meta.state_fields}
    if "eef_quat" in proprio:
        proprio["eef_quat"][3] = 1.0
    return Observation(
        episode_id=episode_id, step=step, instruction="put the bowl on the plate", images=images, proprio=proprio
    )


def timeout_hint(request_timeout: float) -> str:
    """The fix hint for a request cut at its (wall-clock) timeout."""
    return (
        f"send the whole answer within {request_timeout:.0f} s of the request: the limit is wall-clock, from "
        "sending the request to the last byte of the answer, however the bytes are spread out"
    )


def check_policy(
    url: str,
    *,
    health_timeout: float = 60.0,
    request_timeout: float = 30.0,
    act_latency_limit_s: float = 10.0,
) -> ConformanceReport:
    """Run every check against the server at ``url``; never raises for a policy fault.

    Every request is bounded by ``request_timeout`` wall-clock seconds (a server that trickles
    its answer fails with ``policy_timeout``), the wait for ``/health`` by ``health_timeout``;
    an ``/act`` answered within the request timeout but after ``act_latency_limit_s`` fails too.
    """
    report = ConformanceReport(url=url)
    add = report.checks.append
    rng = np.random.default_rng(0)
    with PolicyClient(url, encoding="json", request_timeout=request_timeout) as client:
        try:
            client.wait_healthy(health_timeout)
            add(Check("health", True, "GET /health answered 200"))
        except PolicyError as exc:
            add(
                Check(
                    "health",
                    False,
                    exc.detail,
                    "start an HTTP server on $PORT (bind 0.0.0.0 in a container) that answers "
                    "GET /health with 200 once the model is loaded",
                )
            )
            return report
        try:
            meta = client.metadata()
            report.metadata = meta.model_dump(mode="json")
            add(
                Check(
                    "metadata",
                    True,
                    f"{meta.policy_name}: cameras "
                    f"{[f'{c.name} {c.height}x{c.width}' for c in meta.cameras]}, chunk "
                    f"{meta.chunk_length}, replan {meta.replan_steps}, gripper {meta.gripper_convention}",
                )
            )
        except PolicyError as exc:
            add(
                Check(
                    "metadata",
                    False,
                    exc.detail,
                    "GET /metadata must return a PolicyMetadata JSON object (see openapi.json)",
                )
            )
            return report
        for encoding in ("json", "msgpack"):
            client.encoding = encoding
            episode_id = uuid.uuid4().hex
            try:
                client.reset(episode_id, "put the bowl on the plate")
                add(Check(f"reset ({encoding})", True, "POST /reset accepted"))
            except PolicyError as exc:
                add(
                    Check(
                        f"reset ({encoding})",
                        False,
                        exc.detail,
                        f"POST /reset must accept a ResetRequest body as {encoding} and answer "
                        '{"ok": true} in the same encoding',
                    )
                )
                continue
            for step in (0, 1):
                obs = synthetic_observation(meta, episode_id, step, rng).to_message()
                t0 = time.perf_counter()
                try:
                    result = client.act(obs, meta.chunk_length)
                except PolicyError as exc:
                    hint = (
                        timeout_hint(request_timeout)
                        if exc.reason == "policy_timeout"
                        else "POST /act must answer an ActResponse echoing episode_id and step, with "
                        f"a finite float (T, 7) chunk, 1 <= T <= chunk_length ({meta.chunk_length})"
                    )
                    add(Check(f"act ({encoding}, step {step})", False, f"{exc.reason}: {exc.detail}", hint))
                    break
                elapsed = time.perf_counter() - t0
                ok = elapsed <= act_latency_limit_s
                add(
                    Check(
                        f"act ({encoding}, step {step})",
                        ok,
                        f"chunk {result.actions.shape} in {elapsed * 1e3:.0f} ms",
                        "" if ok else f"answer within {act_latency_limit_s:.0f} s per request",
                    )
                )
        if meta.concurrent_episodes > 1:
            add(_check_concurrency(url, meta, request_timeout))
    return report


def _check_concurrency(url: str, meta: PolicyMetadata, request_timeout: float) -> Check:
    """Spec 1.1: ``min(max_concurrent_episodes, 4)`` episodes at once, each from its own thread
    and connection - all reset first, then three interleaved ``/act`` rounds - must each get valid
    chunks (no 409: every declared episode stays active)."""
    from concurrent.futures import ThreadPoolExecutor

    n = min(meta.concurrent_episodes, 4)
    ids = [uuid.uuid4().hex for _ in range(n)]
    clients = [PolicyClient(url, encoding="msgpack", request_timeout=request_timeout) for _ in range(n)]
    name = f"concurrency ({n} episodes at once)"
    try:
        for client, episode_id in zip(clients, ids, strict=True):
            client.reset(episode_id, "put the bowl on the plate")

        def act(i: int, step: int) -> tuple[int, ...]:
            obs = synthetic_observation(meta, ids[i], step, np.random.default_rng(step * n + i)).to_message()
            return clients[i].act(obs, meta.chunk_length).actions.shape

        with ThreadPoolExecutor(n) as pool:
            for step in range(3):
                list(pool.map(lambda i, step=step: act(i, step), range(n)))
    except PolicyError as exc:
        return Check(
            name,
            False,
            f"{exc.reason}: {exc.detail}",
            f"the metadata declares max_concurrent_episodes={meta.concurrent_episodes}: keep that many episodes "
            "active at once (each by its episode_id, from its /reset on), or declare fewer",
        )
    finally:
        for client in clients:
            client.close()
    return Check(name, True, f"{n} episodes reset, then 3 rounds of /act from {n} threads at once, all answered")


def main(argv: list[str] | None = None) -> None:
    """``python -m submission_spec.conformance URL``: print the report of :func:`check_policy`;
    exit code 0 when the server conforms, 1 when it does not, 2 for a usage error."""
    import typer

    def check(url: str = typer.Argument(..., help="The policy server's URL, e.g. http://127.0.0.1:8000.")) -> None:
        report = check_policy(url)
        print("\n".join(report.lines()))
        print("CONFORMS" if report.ok else "DOES NOT CONFORM")
        raise typer.Exit(0 if report.ok else 1)

    app = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.command(help="Check that a running server speaks submission spec v1.")(check)
    app(args=argv, prog_name="python -m submission_spec.conformance")


if __name__ == "__main__":
    main()
