from __future__ import annotations

import sys
from pathlib import Path

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
