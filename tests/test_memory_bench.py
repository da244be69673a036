"""bench/memory.py's attribution: an object is counted once, under the first component that
reaches it, and a tiny run is measured end to end."""

from __future__ import annotations

import math
import sys

from bench import memory, scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario


def test_deep_size_counts_a_shared_object_once() -> None:
    shared = [1.5] * 100
    seen: set[int] = set()
    first = memory.deep_size([{"a": shared}], seen)
    assert first >= sys.getsizeof(shared)
    assert memory.deep_size([(shared,)], seen) == sys.getsizeof((shared,))


def test_a_tiny_run_is_attributed() -> None:
    run = ScenarioRun(parse_scenario(scale.scenario(2, 10, 2), "tiny"), "grid", 1)
    for _ in range(12):
        run.advance()
    row = memory.measure_now(run)
    assert row["kb_events"] > 0 and row["simulator"] > 0 and row["planner"] > 0
    assert row["rss"] > sum(row[k] for k in memory.components(run))
    assert math.isnan(row["traced"]) or row["traced"] > 0
