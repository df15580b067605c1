"""``python -m liberopro_platform``: see :mod:`liberopro_platform.admin_cli`."""

from liberopro_platform.admin_cli import main

main()
