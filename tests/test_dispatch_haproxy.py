"""A bounded run of bench/dispatch.py: our weights vs round-robin on a real HAProxy.

Three backends of capacity 1x/2x/4x behind HAProxy, open-loop Poisson load at 70 % of total
capacity. Round-robin overloads the 1x backend (it gets a third of the load for a seventh of the
capacity), so its p99 grows with the run; our engine, fed with live backend metrics and writing
weights through the runtime API, must keep p99 at most half of round-robin's. (The full benchmark
also compares with leastconn; that margin is smaller and needs more requests to be stable.)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bench.harness import haproxy as sh

ROOT = Path(__file__).resolve().parents[1]


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_dispatch", ROOT / "bench" / "dispatch.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(sh.find_binary() is None, reason=sh.SKIP_REASON)
@pytest.mark.timeout(120)
def test_our_weights_beat_round_robin_p99() -> None:
    bench = _load_bench()
    cfg = bench.BenchConfig(requests=1500, warmup_s=3.0, strategies=("rr", "ours"))
    report = bench.run_benchmark(cfg)
    rr, ours = report["results"]["rr"], report["results"]["ours"]
    assert ours["error_rate"] == 0.0
    assert ours["p99_ms"] <= 0.5 * rr["p99_ms"], bench.format_report(report)
    # the engine really steered traffic: the 4x backend got the largest weight and most requests
    assert ours["weights"]["s4x"] > ours["weights"]["s2x"] > ours["weights"]["s1x"] >= 1
    assert ours["served"]["s4x"] > ours["served"]["s1x"]
    assert ours["weight_writes"] >= 1
