"""``python -m liberopro_leaderboard serve``: the leaderboard alone (uvicorn), on
``--database-url URL [--host H] [--port P]``."""

from __future__ import annotations

import typer

PROG = "python -m liberopro_leaderboard"

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=__doc__,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _group() -> None:
    """Keeps ``serve`` a subcommand (typer runs a lone command without its name otherwise)."""


@app.command(help="serve the leaderboard alone")
def serve(
    database_url: str | None = typer.Option(
        None,
        envvar="LIBEROPRO_DATABASE_URL",
        show_envvar=False,
        help="the platform's database (default: $LIBEROPRO_DATABASE_URL)",
    ),
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(8080, help="port to listen on"),
) -> None:
    """Serve the leaderboard of the database at ``database_url`` (a SQLAlchemy URL) on
    ``host:port`` with uvicorn until stopped. Exit code 2 when no database URL is given."""
    if not database_url:
        typer.echo(f"{PROG}: error: serve needs --database-url or $LIBEROPRO_DATABASE_URL", err=True)
        raise typer.Exit(2)
    import uvicorn

    from liberopro_leaderboard.app import create_app

    uvicorn.run(create_app(database_url), host=host, port=port)


def main() -> None:
    """Run the command line on ``sys.argv``; usage errors exit with code 2."""
    app(prog_name=PROG)


if __name__ == "__main__":
    main()
