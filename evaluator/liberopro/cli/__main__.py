"""``python -m liberopro.cli``: the ``liberopro`` command."""

from liberopro.cli.main import app

app()
