"""The perfect-knowledge reference of bench/slo.py scores the planner's knobs with the
simulator's ground truth."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.oracle import Requirements, Shape, fewest_replicas, latency_ms, oracle  # noqa: E402
from planner.models.sojourn import sojourn_quantile  # noqa: E402
from simulator.scenario import load_scenario  # noqa: E402

HET = load_scenario(ROOT / "examples/scenarios/heterogeneous.yaml")
W, POOLS = HET.spec.workloads[0], HET.spec.cluster.pools


def test_one_pool_is_the_plain_mmc_quantile() -> None:
    shape = Shape(2.0, "cpu", "gen-old")
    svc = W.service
    mu = svc.rate_per_core * 2.0 ** svc.cpu_exponent
    want = svc.base_latency_ms + 4.0 + sojourn_quantile(0.95, np.array([150 / 8]),
                                                        np.array([mu]), np.array([2.0]))[0]
    assert latency_ms(W, POOLS, shape, 8, 150.0, 0.95, False) == pytest.approx(want, rel=1e-6)


def test_fast_nodes_and_weights_need_fewer_replicas() -> None:
    target = Requirements(latency=((400.0, 0.95),))
    slow = fewest_replicas(W, POOLS, Shape(2.0, "cpu", "gen-old"), 150.0, target, True, (1, 30))
    fast = fewest_replicas(W, POOLS, Shape(2.0, "cpu", "gen-new"), 150.0, target, True, (1, 30))
    rr = fewest_replicas(W, POOLS, Shape(2.0, "cpu", None), 150.0, target, False, (1, 30))
    weighted = fewest_replicas(W, POOLS, Shape(2.0, "cpu", None), 150.0, target, True, (1, 30))
    assert slow is not None and fast is not None and rr is not None and weighted is not None
    assert fast < slow and weighted <= rr
    assert fewest_replicas(W, POOLS, Shape(2.0, "cpu", "gen-new"), 1e5, target, True,
                           (1, 30)) is None


def test_oracle_reports_cost_and_core_hours_per_intent() -> None:
    out = oracle(HET, seed=1)["video/analytics"]
    assert out["infeasible_minutes"] == 0
    assert out["core_hours"] > 0 and out["cost"] > 0
    # Cores are 2-cpu pods over the hour: between the admin's min and max replicas.
    assert 2 * 2 * 1.0 <= out["core_hours"] <= 30 * 2 * 1.0


def test_mixed_pools_match_the_simulators_own_dispatch() -> None:
    from simulator import queueing

    svc = W.service
    mu0 = queueing.service_rate(svc.rate_per_core, 2.0, svc.cpu_exponent, svc.gpu_speedup, "cpu")
    # 8 unpinned pods: 4 on gen-old (speed 1, +4 ms), 4 on gen-new (speed 2).
    mu = np.array([mu0] * 4 + [2 * mu0] * 4)
    base = np.array([svc.base_latency_ms + 4.0] * 4 + [svc.base_latency_ms] * 4)
    servers = np.full(8, 2, dtype=np.int64)
    for weighted in (True, False):
        shares = mu / mu.sum() if weighted else np.full(8, 1 / 8)
        out = queueing.step_outcome(150.0, shares, mu, base, svc.timeout_ms, servers=servers)
        want = queueing.quantile(out.components, 0.95)
        got = latency_ms(W, POOLS, Shape(2.0, "cpu", None), 8, 150.0, 0.95, weighted)
        assert got == pytest.approx(want, rel=1e-6)
    # Weights matter here: by capacity beats round robin.
    assert latency_ms(W, POOLS, Shape(2.0, "cpu", None), 8, 150.0, 0.95, True) < \
        latency_ms(W, POOLS, Shape(2.0, "cpu", None), 8, 150.0, 0.95, False)
