"""No two liberopro modules import each other, directly or through others: the import graph of
the evaluator (grimp's, as import-linter builds it) has no cycle. Imports inside functions and
under ``if TYPE_CHECKING:`` count (a circle of annotations is still a circle of knowledge); the
layering itself is import-linter's (``[tool.importlinter]`` in pyproject.toml)."""

from __future__ import annotations

import grimp


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One shortest cycle (its modules, first one repeated at the end) per import ``a -> b``
    that lies on a cycle: ``b`` reaches ``a`` back. Each cycle is reported once."""
    cycles, seen = [], set()
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is None:
                continue
            cycle = [importer, *back]
            key = frozenset(cycle)
            if key not in seen:
                seen.add(key)
                cycles.append(cycle)
    return cycles


def test_the_cycle_finder_finds_a_cycle_through_a_third_module():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert import_cycles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
    graph.remove_import(importer="p.c", imported="p.a")
    assert import_cycles(graph) == []


def test_no_liberopro_modules_import_each_other_in_a_circle():
    graph = grimp.build_graph("liberopro", exclude_type_checking_imports=False, cache_dir=None)
    assert len(graph.modules) > 100  # the whole evaluator was read
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)
