from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first (``make test`` runs pytest-xdist with ``--dist loadgroup``,
    which hands out work in this order after the groups: a long test that starts last keeps one
    worker busy while the other idles); and every test on a shared run in its scenario's group
    (tests/support/runs.py), so that one worker simulates each scenario once."""
    from tests.support.runs import GROUP_PREFIX

    for item in items:
        if "shared_run" not in getattr(item, "fixturenames", ()):
            continue
        groups = [m.args[0] if m.args else m.kwargs.get("name")
                  for m in item.iter_markers("xdist_group")]
        if not any(isinstance(g, str) and g.startswith(GROUP_PREFIX) for g in groups):
            raise pytest.UsageError(
                f"{item.nodeid} uses shared_run without its scenario's group: mark it with "
                "tests.support.runs.on_shared_run(path) or parametrize it with "
                "shared_run_params(paths)")
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if config.getoption("loadgroup", default=False):   # an xdist worker, --dist loadgroup
        for item in items:
            _group_in_nodeid(item)


def _group_in_nodeid(item: pytest.Item) -> None:
    """Put the item's ``xdist_group`` in its node id (``...@group``), which is how
    ``--dist loadgroup`` reads it. pytest-xdist does so itself by setting the attribute pytest 8
    derived the node id from; from pytest 9.2 on the node id comes from ``_id``, and without this
    every test is its own group (pytest-dev/pytest-xdist#1386, fix proposed in #1388; harmless
    once xdist does it itself: the id then has its ``@``)."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:     # pytest 8: xdist's own hook puts the group in the node id
        return
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    current = getattr(item, "_id", None)
    if names and isinstance(current, NodeId) and "@" not in str(current):
        item._id = NodeId.parse(f"{current}@{'_'.join(names)}")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(params=SCENARIOS, ids=[p.stem for p in SCENARIOS])
def scenario_path(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


@pytest.fixture(scope="session")
def shared_run() -> Iterator[Callable[[Path], Any]]:
    """``shared_run(path)``: the run of a shipped scenario (seed 1) that the tests of this
    process share (tests/support/runs.py)."""
    from tests.support.runs import SharedRun

    runs: dict[Path, SharedRun] = {}

    def get(path: Path) -> SharedRun:
        key = path.resolve()
        if key not in runs:
            runs[key] = SharedRun(key)
        return runs[key]

    yield get
    runs.clear()


@pytest.fixture
def api() -> Iterator[Any]:
    """A Kubernetes API server (kmock's emulator plus bench/harness/apiserver.py) over HTTP."""
    from bench.harness.apiserver import running_apiserver

    with running_apiserver() as server:
        yield server


@pytest.fixture
def kube(api: Any) -> Iterator[Any]:
    """A small client for ``api``."""
    from bench.harness.apiserver import Kube

    k = Kube(api.url)
    yield k
    k.close()
