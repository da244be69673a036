"""The architecture a newcomer reads in README's Layout table, checked: no import cycle between
modules or between folders (the layers themselves are import-linter's contract in
``pyproject.toml``, run by ``make test``)."""

from __future__ import annotations

from collections import defaultdict

import grimp
import pytest

ROOTS = ("planner", "actuators", "knowledge", "simulator")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*ROOTS, cache_dir=None)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _folder(module: str, graph: grimp.ImportGraph) -> str:
    """The package a module is in (a package's ``__init__`` is in the package itself)."""
    if graph.find_children(module):
        return module
    return module.rpartition(".")[0] or module


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(edges) == []


def test_no_import_cycle_between_folders(graph: grimp.ImportGraph) -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for m in graph.modules:
        src = _folder(m, graph)
        for dep in graph.find_modules_directly_imported_by(m):
            dst = _folder(dep, graph)
            # A folder and its own subfolders are one unit (``planner.api`` includes its
            # ``routers``); every other pair of folders must not import each other in a cycle.
            if dst != src and not dst.startswith(src + ".") and not src.startswith(dst + "."):
                edges[src].add(dst)
    assert _cycles(edges) == []


def test_benchmarks_never_import_the_tests() -> None:
    """The benchmarks and the tests share ``bench/harness``; the benchmarks import nothing of
    ``tests`` (that edge pointed the wrong way)."""
    import ast
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench"
    offending = []
    for path in sorted(bench.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offending += [f"{path.name}: {n}" for n in names
                          if n == "tests" or n.startswith(("tests.", "support."))]
    assert offending == []
