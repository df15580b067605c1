"""The ``liberopro`` command line: :mod:`.main` builds the typer app from one module per command
group (evaluate, report, instances, oracle, catalog, policy, demonstrations); :mod:`.common` and
:mod:`.tables` are what they share. :mod:`.shard` is the evaluator image's own entry point
(``python -m liberopro.cli.shard``). Nothing is imported here, so that the shard runner does not
load the other commands."""
