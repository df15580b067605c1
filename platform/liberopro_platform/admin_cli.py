"""``python -m liberopro_platform``: run and administer a platform (database migrations, the API,
a worker, beat, teams/users/tokens, the sandbox sweep and firewall)."""

from __future__ import annotations

import socket

import typer

app = typer.Typer(
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
    help="Run and administer a LIBERO-Pro2.0 submission platform (settings: LIBEROPRO_* env).",
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from liberopro.schema.results import RESULTS_SCHEMA_VERSION

        from submission_spec import SPEC_VERSION

        typer.echo(
            f"liberopro-platform {version('liberopro-platform')} (evaluator liberopro {version('liberopro')}, "
            f"policy contract spec {SPEC_VERSION}, results schema {RESULTS_SCHEMA_VERSION}); the simulation "
            "stack is the evaluator image's: docker run --rm --entrypoint liberopro liberopro/evaluator:latest --version"
        )
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the versions, then exit."
    ),
) -> None:
    """Run and administer a LIBERO-Pro2.0 submission platform (settings: LIBEROPRO_* env)."""


def _settings():
    from liberopro_platform.config import get_settings

    return get_settings()


def _sessions():
    from liberopro_platform.db import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(_settings().database_url))


@app.command("db-upgrade")
def db_upgrade() -> None:
    """Create or migrate the tables (Alembic, to the newest revision)."""
    from liberopro_platform.db import upgrade

    upgrade(_settings().database_url)
    typer.echo("database at the newest revision")


@app.command("create-team")
def create_team(
    name: str, per_day: int | None = typer.Option(None), concurrent: int | None = typer.Option(None)
) -> None:
    """Create a team (limits default to the platform's)."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Team

    with transaction(_sessions()) as s:
        s.add(Team(name=name, submissions_per_day=per_day, max_concurrent=concurrent))
    typer.echo(f"team {name} created")


@app.command("create-user")
def create_user(
    name: str,
    team: str = typer.Option(..., help="Team name (created if missing)."),
    admin: bool = typer.Option(False, "--admin"),
    days: int | None = typer.Option(None),
) -> None:
    """Create a user and print a first API token for it."""
    from sqlalchemy import select

    from liberopro_platform.db import transaction
    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    with transaction(_sessions()) as s:
        t = s.scalar(select(Team).where(Team.name == team))
        if t is None:
            t = Team(name=team)
            s.add(t)
            s.flush()
        user = User(name=name, team_id=t.id, is_admin=admin)
        s.add(user)
        s.flush()
        _, token = issue_token(s, user, days or _settings().token_ttl_days, "first token")
    typer.echo(token)


@app.command("issue-token")
def issue_token_cmd(user: str, days: int | None = typer.Option(None), label: str = "") -> None:
    """Print a new API token for an existing user."""
    from sqlalchemy import select

    from liberopro_platform.db import transaction
    from liberopro_platform.models import User
    from liberopro_platform.security import issue_token

    with transaction(_sessions()) as s:
        u = s.scalar(select(User).where(User.name == user))
        if u is None:
            typer.echo(f"error: no user {user}", err=True)
            raise typer.Exit(2)
        _, token = issue_token(s, u, days or _settings().token_ttl_days, label)
    typer.echo(token)


@app.command()
def api(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the API (uvicorn)."""
    import uvicorn

    from liberopro_platform.api.app import create_app

    uvicorn.run(create_app(), host=host, port=port, log_level="info")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def worker(
    ctx: typer.Context,
    name: str = typer.Option(
        None, help="Worker name; keep it stable across restarts so a restarted worker recovers its work."
    ),
    queues: str = typer.Option(
        "shards,control",
        help="Queues to serve, comma-separated: shards (validation "
        "and shards: needs the sandbox), control (aggregation). A worker serving only "
        "control never waits behind a shard.",
    ),
    beat: bool = typer.Option(False, help="Also run celery beat, i.e. the stuck sweep (one per platform)."),
) -> None:
    """Run a Celery worker (solo pool: one task at a time; run several for parallel shards)."""
    from liberopro_platform.celery_app import app as celery_app

    settings = _settings()
    roles = [q.strip() for q in queues.split(",") if q.strip()]
    if not roles or set(roles) - {"shards", "control"}:
        typer.echo(f"error: --queues takes shards and/or control, not {queues!r}", err=True)
        raise typer.Exit(2)
    argv = [
        "worker",
        "-Q",
        ",".join(f"{settings.queue}.{r}" for r in roles),
        "-n",
        name or f"worker@{socket.gethostname()}",
        "--pool=solo",
        "--without-mingle",
        "--without-gossip",
        "--loglevel=INFO",
        *ctx.args,
    ]
    if beat:
        argv.append("--beat")
    celery_app.worker_main(argv)


@app.command("beat")
def beat_cmd() -> None:
    """Run celery beat: the stuck sweep every sweep_interval_s, in beat's own process."""
    from liberopro_platform.celery_app import app as celery_app

    celery_app.start(["beat", "--loglevel=INFO"])


@app.command("workers")
def workers_cmd() -> None:
    """List the workers (and beat) from their heartbeat rows: alive or gone, roles, current task."""
    from liberopro_platform.heartbeat import all_rows, is_live
    from liberopro_platform.models import utcnow

    stale_s = _settings().heartbeat_stale_s
    with _sessions()() as s:
        rows = all_rows(s)
    now = utcnow()
    for r in rows:
        state = "alive" if is_live(r, now, stale_s) else ("stopped" if r.stopped_at else "GONE")
        doing = r.task or ("idle" if "beat" not in r.roles else f"last sweep {(r.info or {}).get('last_sweep_at')}")
        typer.echo(
            f"{r.name:<40} {state:<8} {r.roles:<14} beat {(now - r.beat_at).total_seconds():6.0f} s ago  "
            f"{r.hostname} pid {r.pid}  {doing}"
        )
    if not rows:
        typer.echo("no worker has reported")


@app.command("sweep-sandboxes")
def sweep_sandboxes(worker_name: str | None = typer.Option(None, "--worker")) -> None:
    """Remove leftover sandbox containers, volumes and networks (of one worker, or all)."""
    from liberopro_platform.sandbox import make_backend

    n = make_backend(_settings(), worker_name or "admin").sweep(worker_name)
    typer.echo(f"removed {n} sandbox resources")


@app.command("firewall")
def firewall_cmd() -> None:
    """Install the host rule that stops sandboxed policies from reaching host services."""
    from liberopro_platform.sandbox.firewall import run

    raise typer.Exit(run())


@app.command("stuck")
def stuck(act: bool = typer.Option(False, "--act", help="Requeue or fail them now.")) -> None:
    """List stuck submissions with the reason (and act on them with --act)."""
    from liberopro_platform.celery_app import CeleryEnqueue, make_celery
    from liberopro_platform.db import transaction
    from liberopro_platform.pipeline import Pipeline

    settings = _settings()
    p = Pipeline(settings, _sessions(), CeleryEnqueue(make_celery(settings), settings.queue), "admin")
    if act:
        found = p.sweep_stuck()
    else:
        with transaction(p.sessions) as s:
            found = p.find_stuck(s, p.enqueue.pending())
    for f in found:
        typer.echo(f"{f.submission_id} [{f.state}] {f.reason} -> {f.action}")
    if not found:
        typer.echo("nothing stuck")


def main() -> None:
    app(prog_name="python -m liberopro_platform")


if __name__ == "__main__":
    main()
