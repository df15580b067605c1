"""``liberopro serve-example`` (an example policy server) and ``liberopro check-policy`` (the spec
conformance check of a running server)."""

from __future__ import annotations

import typer

from liberopro.cli.common import _fail, console, out


def serve_example(
    name: str = typer.Argument(..., help="zero or random"),
    protocol: str = typer.Option("liberopro", help="Wire protocol to serve: liberopro, openpi or openvla."),
) -> None:
    """Serve an example policy on $PORT (default 8000)."""
    from submission_spec.server import serve

    from submission_spec.examples import EXAMPLES

    if name not in EXAMPLES:
        _fail(f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}")
    if protocol not in ("liberopro", "openpi", "openvla"):
        _fail(f"--protocol must be liberopro, openpi or openvla, not {protocol!r}")
    serve(EXAMPLES[name](), protocol=protocol)


def check_policy_cmd(
    url: str = typer.Argument(..., help="Base URL of the policy server, e.g. http://127.0.0.1:8000."),
    health_timeout: float = typer.Option(
        60.0, "--health-timeout", min=1.0, help="Seconds to wait for /health to answer 200 (a model may load slowly)."
    ),
) -> None:
    """Check that a running server conforms to submission spec v1."""
    from submission_spec.conformance import check_policy

    console.print(f"waiting up to {health_timeout:.0f} s for {url.rstrip('/')}/health")
    try:
        report = check_policy(url, health_timeout=health_timeout)
    except ValueError as exc:  # the client refuses a URL it cannot use (no http:// or https://)
        _fail(str(exc))
    for line in report.lines():
        out.print(line, markup=False, highlight=False)
    out.print("CONFORMS" if report.ok else "DOES NOT CONFORM")
    raise typer.Exit(0 if report.ok else 1)
