"""Exposure transitions and per-pool scaling in the simulator (docs/regions.md): a pool the
Service is withdrawn from drains (serves its clients until the pods replacing its pods are
ready); an HPA per exposing pool (``simulator/pool_hpa.py``) scales each pool on its own
utilisation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.domain.errors import PermanentError
from planner.domain.ports import UnsupportedOperation
from simulator.cluster import SimulatedCluster
from simulator.pool_hpa import PoolHPA
from simulator.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
START = 1_767_225_600.0
KEY = "shop/storefront"


def doc(us_share: float, exposure: list[str]) -> dict[str, Any]:
    d: dict[str, Any] = yaml.safe_load((ROOT / "examples/scenarios/multi-region.yaml")
                                       .read_text())
    d["duration"] = "30m"
    d["clients"]["regions"][1] = {"name": "us-east", "share": us_share}
    d["workloads"][0]["exposure"] = exposure
    return d


def pods_by_pool(sim: SimulatedCluster) -> dict[tuple[str | None, bool], int]:
    out: dict[tuple[str | None, bool], int] = {}
    for p in sim.workloads[KEY].pods:
        k = (p.pool, p.ready(sim.time))
        out[k] = out.get(k, 0) + 1
    return out


def test_a_withdrawn_pool_serves_its_clients_until_the_replacing_pods_are_ready() -> None:
    sc = parse_scenario(doc(0.0, ["eu", "us"]), "t", ROOT)
    sim = SimulatedCluster(sc, seed=1, start_time=START)
    sim.scale(KEY, 8)
    for _ in range(12):
        sim.step(5.0)
    assert pods_by_pool(sim) == {("eu", True): 7, ("us", True): 1}
    # Withdraw eu, where every client is: us needs 7 more pods, 20 s to start.
    sim.expose(KEY, ("us",))
    w = sim.workloads[KEY]
    lb = sim.regions.lb_cost_per_hour if sim.regions else 0.0
    drained = False
    for _ in range(12):
        sim.step(5.0)
        rec = w.history[-1]
        assert rec.dropped == 0.0, pods_by_pool(sim)
        if ("eu", True) in pods_by_pool(sim):
            drained = True
            # eu still serves its clients, and its load balancer is still paid
            pods = sum(p.cpu * sim.pools[p.pool or ""].cost_per_core_hour for p in w.pods
                       if p.node is not None)
            assert rec.cost_per_hour == pytest.approx(pods + 2 * lb)
    assert drained
    assert pods_by_pool(sim) == {("us", True): 8}       # cut over: eu's pods went together
    assert w.history[-1].cost_per_hour == pytest.approx(
        8 * sim.pools["us"].cost_per_core_hour + lb)


def test_the_drain_ends_once_as_many_pods_are_ready_as_served_every_client() -> None:
    """A scale-up during the drain does not hold the withdrawn pool: it cuts over once the
    pods where the exposure now is are as many as served every client at the withdrawal."""
    sc = parse_scenario(doc(0.0, ["eu", "us"]), "t", ROOT)
    sim = SimulatedCluster(sc, seed=1, start_time=START)
    sim.scale(KEY, 8)
    for _ in range(12):
        sim.step(5.0)
    sim.expose(KEY, ("us",))
    sim.step(5.0)
    sim.step(5.0)
    sim.scale(KEY, 12)                       # 4 more pods, ready 10 s after the first 7
    seen = []
    for _ in range(8):
        sim.step(5.0)
        assert sim.workloads[KEY].history[-1].dropped == 0.0
        seen.append(pods_by_pool(sim))
    cut = [p for p in seen if ("eu", True) not in p and p.get(("us", False), 0) > 0]
    assert cut and cut[0][("us", True)] == 8, seen
    assert seen[-1] == {("us", True): 12}


def test_widening_and_fixed_exposure_are_unchanged_by_draining() -> None:
    """No pod outside the exposure: the serving pools are the exposure itself."""
    sc = parse_scenario(doc(0.5, ["eu"]), "t", ROOT)
    sim = SimulatedCluster(sc, seed=1, start_time=START)
    sim.expose(KEY, ("eu", "us"))
    for _ in range(10):
        sim.step(5.0)
        assert sim._serving(sim.workloads[KEY], sim.time) == ("eu", "us")


def test_hpa_rule_per_pool() -> None:
    hpa = PoolHPA(0.6, max_replicas=20)
    assert hpa.desired("a", 0.0, 4, 4, 0.9) == 6             # ceil(4 * 0.9 / 0.6)
    assert hpa.desired("b", 0.0, 4, 4, 0.63) == 4            # within the 10 % tolerance
    assert hpa.desired("c", 0.0, 4, 4, None) == 4            # no metrics: no change
    assert hpa.desired("d", 0.0, 2, 2, 3.0) == 6             # at most +100 % or +4
    assert hpa.desired("d", 5.0, 6, 6, 3.0) == 6             # one scale-up per 15 s
    assert hpa.desired("e", 0.0, 8, 8, 0.6) == 8
    assert hpa.desired("e", 60.0, 8, 8, 0.15) == 8           # the window remembers 8
    assert hpa.desired("e", 400.0, 8, 8, 0.15) == 2          # 300 s later it scales down
    assert hpa.desired("f", 0.0, 1, 1, 0.0) == 1             # never below one pod a pool
    with pytest.raises(ValueError, match="target"):
        PoolHPA(1.5, 10)


def test_each_pool_scaled_on_its_own_utilisation() -> None:
    # Every client is in eu-west: us's pods idle, eu's carry the load.
    sc = parse_scenario(doc(0.0, ["eu", "us"]), "t", ROOT)
    sim = SimulatedCluster(sc, seed=1, start_time=START)
    sim.scale(KEY, 4)
    sim.scale_pools(KEY, {"eu": 2, "us": 2})
    hpa = PoolHPA(0.6, max_replicas=60)
    counts: dict[str, int] = {}
    for _ in range(40):                      # 10 min, a sync per 15 s
        for _ in range(3):
            sim.step(5.0)
        counts = hpa.step(sim)[KEY]
    assert counts["us"] == 1                 # scaled down to one pod, its own HPA's floor
    assert counts["eu"] >= 3                 # about 170 req/s by then, ~100 req/s a pod, 60 %
    assert sim.workloads[KEY].config.replicas == counts["eu"] + counts["us"]
    ready = pods_by_pool(sim)
    assert ready.get(("us", True), 0) + ready.get(("us", False), 0) == 1
    eu_util = [p.utilization for p in sim.workloads[KEY].pods
               if p.pool == "eu" and p.ready(sim.time)]
    assert 0.3 < sum(eu_util) / len(eu_util) < 0.9


def test_scale_pools_names_what_is_wrong() -> None:
    sc = parse_scenario(doc(0.0, ["eu"]), "t", ROOT)
    sim = SimulatedCluster(sc, seed=1, start_time=START)
    with pytest.raises(PermanentError, match="not exposing"):
        sim.scale_pools(KEY, {"us": 2})
    with pytest.raises(PermanentError, match="negative"):
        sim.scale_pools(KEY, {"eu": -1})
    plain = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml").read_text())
    other = SimulatedCluster(parse_scenario(plain, "p", ROOT), seed=1, start_time=START)
    name = next(iter(other.workloads))
    with pytest.raises(UnsupportedOperation, match="not exposed per pool"):
        other.scale_pools(name, {"x": 1})
