"""``liberopro``: the command line of LIBERO-Pro2.0 (the console script, ``liberopro.cli.main:app``).

The commands live in one module per group; this module only puts them on one typer app, in the
order ``liberopro --help`` lists them, then adds the commands other installed packages contribute."""

from __future__ import annotations

import typer

from liberopro.cli import catalog, demonstrations, evaluate, instances, oracle, policy, report

#: ``rich_markup_mode=None``: click's plain help, rewrapped to the terminal's width (80 columns
#: included) and to 80 when piped; typer's rich panels kept the docstrings' line breaks and cut
#: option help at 80 columns.
app = typer.Typer(
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
    help="LIBERO-Pro2.0: evaluate robot policies on LIBERO under static and runtime shifts.",
)


def _print_version(value: bool) -> None:
    if value:
        from liberopro.stack import version_lines

        typer.echo("\n".join(version_lines()))
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the evaluator's version and the simulation stack's, then exit.",
    ),
) -> None:
    """LIBERO-Pro2.0: evaluate robot policies on LIBERO under static and runtime shifts."""


app.command()(evaluate.evaluate)
app.command()(evaluate.merge)
app.command()(evaluate.demo)
app.command("report")(report.report_cmd)
app.add_typer(instances.app, name="instances")
app.command()(instances.review)
app.command("oracle")(oracle.oracle_cmd)
app.command("split")(catalog.split_cmd)
app.command("shifts")(catalog.shifts_cmd)
app.command("serve-example")(policy.serve_example)
app.command("check-policy")(policy.check_policy_cmd)
app.add_typer(demonstrations.app, name="demos")


def _register_extensions() -> None:
    """Commands contributed by other packages through the ``liberopro.commands`` entry point group
    (each a ``register(app)``): the platform's ``submit``, ``status`` and ``cancel``
    (``platform/pyproject.toml``). The evaluator imports none of them by name. One whose package or its
    dependencies are not installed (e.g. the platform's in an image that has only the evaluator's)
    adds nothing, as before; any other error in it raises."""
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="liberopro.commands"), key=lambda e: e.name):
        try:
            register = ep.load()
        except ModuleNotFoundError:
            continue
        register(app)


_register_extensions()
