"""The length gate (scripts/check_function_length.py): no function over 100 lines outside tests/."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _gate():
    spec = importlib.util.spec_from_file_location("check_function_length", REPO / "scripts/check_function_length.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_function_over_100_lines_outside_tests():
    assert _gate().offenders() == []


def test_the_gate_measures_def_to_last_line_and_skips_tests(tmp_path):
    gate = _gate()
    body = "\n".join(f"    x{i} = {i}" for i in range(100))  # def line + 100 = 101 lines
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/long.py").write_text(
        f"class C:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
    )
    (tmp_path / "pkg/short.py").write_text("def f():\n" + "\n".join(f"    y{i} = {i}" for i in range(99)) + "\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_long.py").write_text("def test():\n" + body + "\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv/dep.py").write_text("def g():\n" + body + "\n")
    assert gate.offenders(tmp_path) == ["pkg/long.py:2 m (101 lines)"]
