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
