"""``python -m liberopro.cli.shard``: the evaluator image's entry point, the platform's worker's only
way in (:mod:`liberopro.runs.shard` does the work). Three commands; stdout carries only marked
event lines (``LIBEROPRO-EVENT {json}``, :mod:`liberopro.schema.shard`), everything else goes to
stderr:

``check URL CHECK_JSON``   the spec conformance check (validation): one ``conformance`` event;
                exit 0.
``run URL SHARD_JSON_PATH``   the shard's episodes: ``hello`` (evaluator and simulator versions),
                ``metadata``, one ``episode`` per finished episode (in the order they finish
                when several streams run), then ``done`` (exit 0) or
                ``error`` (exit 3: the policy could not be used; exit 4: the simulation stack or
                the shard's instances were refused).
``warmup``      compile robosuite's numba functions into ``NUMBA_CACHE_DIR`` (the image build).

Anything else: a usage message on stderr, exit 2. Other exceptions propagate (a traceback on
stderr, exit 1). No signal handler is installed: SIGTERM (the worker stopping the container on
cancel or time limit) ends the process at once.
"""

from __future__ import annotations

from pathlib import Path

import typer

from liberopro.runs import shard
from liberopro.schema.results import ConformanceEvent, ErrorEvent
from liberopro.schema.shard import CheckSpec, ShardSpec

PROG = "python -m liberopro.cli.shard"

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    help="The shard runner of the evaluator image: check URL CHECK_JSON | run URL SHARD_JSON | warmup.",
)


@app.command()
def check(
    url: str = typer.Argument(..., metavar="URL", help="Base URL of the policy server."),
    check_json: str = typer.Argument(..., metavar="CHECK_JSON", help="The check's limits, a CheckSpec as JSON."),
) -> None:
    """The spec conformance check of the policy at URL: one ``conformance`` event, exit 0."""
    report = shard.check(url, CheckSpec.model_validate_json(check_json))
    shard.stdout_emit(ConformanceEvent(report=report))


@app.command()
def run(
    url: str = typer.Argument(..., metavar="URL", help="Base URL of the policy server."),
    shard_json: Path = typer.Argument(..., metavar="SHARD_JSON", help="The shard file, a ShardSpec as JSON."),
) -> None:
    """Run the shard's episodes against the policy at URL, one event line each; exit 3 when the
    policy could not be used, 4 when the stack or the shard's instances were refused."""
    from liberopro.schema.manifest import ManifestError
    from liberopro.stack import StackError
    from submission_spec import PolicyError

    spec = ShardSpec.model_validate_json(shard_json.read_text())
    shard.log_to_stderr()
    shard.seed_numba_cache()  # robosuite's numba functions, compiled at image build (~0.9 MB)
    try:
        shard.run_shard(spec, shard.stdout_emit, policy_url=url)
    except PolicyError as exc:
        shard.stdout_emit(ErrorEvent(kind="policy", reason=exc.reason, message=exc.detail))
        raise typer.Exit(3) from None
    except (StackError, ManifestError) as exc:
        shard.stdout_emit(ErrorEvent(kind="internal", message=str(exc)))
        raise typer.Exit(4) from None


@app.command()
def warmup() -> None:
    """Compile robosuite's numba functions into ``NUMBA_CACHE_DIR`` (the evaluator image's build)."""
    shard.warmup()


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return its exit code instead
    of leaving the process: 0 done, 2 usage, 3 the policy could not be used, 4 the stack or the
    shard's instances were refused."""
    try:
        app(args=argv, prog_name=PROG)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    app(prog_name=PROG)
