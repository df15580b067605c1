"""Every file the repository's docstrings, comments and docs cite is in the repository.

Facts are cited from LIBERO's own files or from pages of ``docs/`` (``docs/definition.md``,
``docs/libero-facts.md``, ...), never from files outside the repository. This test scans the
tracked ``.py``, ``.md``, ``.toml``, ``.sh`` and ``.yaml`` files for

* any mention of the out-of-repository reference folder, and
* any ``*.md`` / ``*.txt`` file name that names no tracked file: a name with a folder must exist
  relative to the repository root or to the citing file (Markdown links between ``docs/`` pages);
  a bare name must be the name of some tracked file (``README.md``, ``shifts.md``).

Names of files the code writes (outputs, not citations) are listed in :data:`OUTPUTS`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUFFIXES = (".py", ".md", ".toml", ".sh", ".yaml", ".yml")
# Built from parts so that this file does not match itself.
REFERENCE_FOLDER = re.compile("shared" + "/" + "reference")
# A file name ending in .md or .txt, with optional folders; not part of a URL or a longer path.
FILE_NAME = re.compile(r"(?<![\w./:$-])((?:[\w.-]+/)*[\w.-]*\w\.(?:md|txt))\b")

#: File names the code writes, so a mention of them is not a citation.
OUTPUTS = {
    "report.md": "written by `liberopro report` (evaluator/liberopro/report/)",
    "requirements.txt": "written by docker/build-images.sh for the offline wheel build",
    **{
        f"requirements-{image}.txt": "an image's locked requirements, exported by docker/build-images.sh"
        for image in ("policy", "evaluator", "platform", "bc", "NAME")
    },
    "cases.txt": "a temporary case list written by tests/evaluator/test_report.py",
}


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if f.endswith(SUFFIXES)]


def dangling_citations() -> list[str]:
    """``path:line: what`` for every citation that names nothing in the repository."""
    files = tracked_files()
    everything = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    basenames = {Path(f).name for f in everything.splitlines()}
    this = Path(__file__).resolve().relative_to(REPO).as_posix()
    problems = []
    for rel in files:
        if rel == this:
            continue
        path = REPO / rel
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if REFERENCE_FOLDER.search(line):
                problems.append(f"{rel}:{lineno}: cites the reference folder outside the repository")
            for name in dict.fromkeys(FILE_NAME.findall(line)):  # once per line, in order
                base = name.rsplit("/", 1)[-1]
                if base in OUTPUTS:
                    continue
                if "/" in name:
                    found = (REPO / name).exists() or (path.parent / name).exists()
                else:
                    found = base in basenames
                if not found:
                    problems.append(f"{rel}:{lineno}: cites {name}, which is not in the repository")
    return problems


def test_every_cited_file_is_in_the_repository():
    problems = dangling_citations()
    assert not problems, "citations of files outside the repository:\n" + "\n".join(problems)


def test_the_scanner_finds_what_it_should():
    """The pattern picks out cited names and skips URLs and globs."""
    found = FILE_NAME.findall(
        "see ``docs/definition.md``, [x](libero-facts.md), https://github.com/o/r/README.md, *.md, "
        "bench.md5, out/paper-excerpt.txt"
    )
    assert found == ["docs/definition.md", "libero-facts.md", "out/paper-excerpt.txt"]
