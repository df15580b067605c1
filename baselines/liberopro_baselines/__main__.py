"""``python -m liberopro_baselines``: the ``liberopro-bc`` command."""

from liberopro_baselines.cli import app

app(prog_name="liberopro-bc")
