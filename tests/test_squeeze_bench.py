"""A bounded run of bench/squeeze.py: ``squeeze`` against ``balance`` on a real HAProxy.

Three identical backends, a steady load worth about one pod: ``balance`` keeps every pod busy,
``squeeze`` leaves at least one idle (its minimum share only), and the bench finds how many pods
each needs for squeeze's p99 by rerunning with fewer. The p99 figures themselves are the full
benchmark's business (a few seconds of load on a shared machine are too noisy to compare).
"""

from __future__ import annotations

import pytest

from bench import squeeze as bench
from bench.harness import haproxy as sh


@pytest.mark.slow
@pytest.mark.skipif(sh.find_binary() is None, reason=sh.SKIP_REASON)
@pytest.mark.timeout(180)
def test_squeeze_leaves_pods_idle_and_the_bench_counts_pods_needed() -> None:
    cfg = bench.SqueezeBenchConfig(pods=3, workers=2, work_ms=50.0, load=0.3, warmup_s=5.0,
                                   measure_s=5.0)
    report = bench.run_benchmark(cfg)
    runs, needed = report["runs"], report["pods_needed"]
    text = bench.format_report(report)
    assert all(r["errors"] == 0 for r in runs.values()), text
    assert runs["balance-3"]["busy"] == ["p0", "p1", "p2"], text
    squeeze = runs["squeeze-3"]
    assert 1 <= len(squeeze["busy"]) < 3, text  # 36 req/s: two pods under the threshold 0.8
    idle = [p for p in squeeze["shares"] if p not in squeeze["busy"]]
    assert all(squeeze["weights"][p] < squeeze["weights"][squeeze["busy"][0]] for p in idle)
    assert all(squeeze["weights"][p] >= 1 for p in idle)  # ready pods never get 0
    # the confirmation rerun with only the busy pods, and balance's search
    assert needed["squeeze"] == len(squeeze["busy"])
    assert f"squeeze-{len(squeeze['busy'])}" in runs
    assert needed["balance"] is None or needed["balance"] in needed["balance_searched"]
    assert "pods needed for p99" in text
