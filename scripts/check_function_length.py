"""Length gate: no function or method longer than 100 lines outside ``tests/`` (issue 21, item 9).

Run by ``scripts/test.sh`` (phase "lint") and by ``tests/test_function_length.py`` (fast tier):

    uv run --frozen python scripts/check_function_length.py

A function's length is its span in the file, from its ``def`` line (decorators not counted) to
its last line, docstring and comments included; a nested function counts in its parent's
length and on its own. Exit status 1 and one line per offender (``path:line name (N lines)``)
when any function is longer; complexity has its own gate (ruff's C901, pyproject.toml).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The longest function allowed (lines).
MAX_LINES = 100
#: Directories never read: tests (fixtures and scenario tables may be long), virtual
#: environments, caches and build output.
SKIP_DIRS = frozenset({"tests", "node_modules", "build", "dist", "__pycache__"})


def python_files(root: Path) -> Iterator[Path]:
    """Every ``*.py`` file under ``root`` outside :data:`SKIP_DIRS` and hidden directories
    (``.venv``, ``.git``), in path order."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if not any(p in SKIP_DIRS or p.startswith(".") for p in parts):
            yield path


def long_functions(source: str, max_lines: int = MAX_LINES) -> list[tuple[int, str, int]]:
    """(def line, name, length in lines) of every function in ``source`` longer than
    ``max_lines``, in line order. ``SyntaxError`` for source that does not parse."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > max_lines:
                out.append((node.lineno, node.name, length))
    return sorted(out)


def offenders(root: Path = REPO, max_lines: int = MAX_LINES) -> list[str]:
    """``path:line name (N lines)`` for every function over ``max_lines`` under ``root``."""
    return [
        f"{path.relative_to(root)}:{line} {name} ({length} lines)"
        for path in python_files(root)
        for line, name, length in long_functions(path.read_text(encoding="utf-8"), max_lines)
    ]


def main() -> int:
    found = offenders()
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} function(s) over {MAX_LINES} lines outside tests/: split them")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
