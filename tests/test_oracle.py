"""The perfect-knowledge reference of bench/slo.py scores the planner's knobs with the
simulator's ground truth."""

from __future__ import annotations

import itertools
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.oracle import (  # noqa: E402
    Failures,
    Option,
    Packer,
    Requirements,
    Shape,
    _pods,
    _prune,
    expected_availability,
    fewest_replicas,
    joint,
    latency_ms,
    oracle,
    served_rate,
    uncovered_notes,
)
from planner.models.sojourn import sojourn_quantile  # noqa: E402
from simulator.cluster import SimulatedCluster  # noqa: E402
from simulator.scenario import PoolSpec, Scenario, load_scenario, parse_scenario  # noqa: E402

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


# ---------------------------------------------------------------- joint, availability, GPUs

def _intent(name: str, priority: float, objectives: list[dict[str, Any]],
            active: bool = True) -> dict[str, Any]:
    return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
            "metadata": {"name": name},
            "spec": {"targetRef": {"kind": "Deployment", "name": name}, "priority": priority,
                     "active": active, "objectives": objectives}}


def _profile(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
            "metadata": {"name": name}, "spec": spec}


def _workload(name: str, rate: float, replicas: int = 0, **service: Any) -> dict[str, Any]:
    return {"name": name, "cpu": 1, "replicas": replicas,
            "service": {"rate_per_core": 100, "base_latency_ms": 2, **service},
            "trace": {"kind": "constant", "rate": rate}}


P95 = [{"name": "p95", "value": 50, "measuredBy": "p95"}]


def _scenario(pools: list[dict[str, Any]], workloads: list[dict[str, Any]],
              intents: list[dict[str, Any]], actuators: list[str],
              profiles: list[dict[str, Any]] | None = None, **admin: Any) -> Scenario:
    return parse_scenario({
        "name": "t", "duration": "10m", "step_s": 5, "cluster": {"pools": pools},
        "workloads": workloads,
        "admin": {"actuators": actuators, "replicas": {"min": 1, "max": 40}, **admin},
        "manifests": [*(profiles or [_profile("p95", {"type": "latency", "percentile": 95})]),
                      *intents]})


SMALL = [{"name": "small", "nodes": 1, "cpu": 8}]


def _cores(out: dict[str, Any]) -> float:
    """Mean cores over the 10 minutes."""
    return float(out["core_hours"]) * 6.0


def test_two_intents_that_each_fit_alone_share_a_small_pool_by_priority() -> None:
    wls = [_workload("a", 200), _workload("b", 200)]
    alone = {n: oracle(_scenario(SMALL, wls, [_intent("a", 0.5, P95, n == "a"),
                                              _intent("b", 0.5, P95, n == "b")],
                                 ["replicas"]), 1)[f"default/{n}"] for n in "ab"}
    # Each fits the 8 cores alone; together they need more.
    assert all(v["infeasible_minutes"] == 0 for v in alone.values())
    assert _cores(alone["a"]) + _cores(alone["b"]) > 8
    for high, low in (("a", "b"), ("b", "a")):
        sc = _scenario(SMALL, wls, [_intent(high, 0.9, P95), _intent(low, 0.2, P95)],
                       ["replicas"])
        out = oracle(sc, 1)
        hi, lo = out[f"default/{high}"], out[f"default/{low}"]
        assert hi["infeasible_minutes"] == 0
        assert hi["core_hours"] == pytest.approx(alone[high]["core_hours"])
        assert lo["infeasible_minutes"] == 10 and lo["contended_minutes"] == 10
        assert lo["core_hours"] == 0 and lo["cost"] == 0
        assert _cores(hi) + _cores(lo) <= 8


def test_contention_moves_one_intent_to_a_dearer_pool_and_respects_capacity() -> None:
    pools = [{"name": "cheap", "nodes": 1, "cpu": 8, "cost_per_core_hour": 0.02},
             {"name": "dear", "nodes": 2, "cpu": 8, "cost_per_core_hour": 0.05}]
    wls = [_workload("a", 200), _workload("b", 200)]

    def run(active: str) -> dict[str, Any]:
        sc = _scenario(pools, wls, [_intent("a", 0.3, P95, "a" in active),
                                    _intent("b", 0.9, P95, "b" in active)],
                       ["replicas", "placement"])
        return oracle(sc, 1)

    a, b, both = run("a")["default/a"], run("b")["default/b"], run("ab")
    assert a["pools_used"] == ["cheap"] and b["pools_used"] == ["cheap"]
    assert _cores(a) + _cores(b) > 8          # both cannot have the cheap pool
    ja, jb = both["default/a"], both["default/b"]
    assert ja["infeasible_minutes"] == 0 and jb["infeasible_minutes"] == 0
    assert ja["contended_minutes"] + jb["contended_minutes"] == 10
    assert "dear" in ja["pools_used"] + jb["pools_used"]
    assert ja["cost"] + jb["cost"] > a["cost"] + b["cost"]
    # The search cut short after one combination: the greedy still fits and costs no less.
    cut = oracle(_scenario(pools, wls, [_intent("a", 0.3, P95), _intent("b", 0.9, P95)],
                           ["replicas", "placement"]), 1,
                 search_limit=1)
    assert cut["default/a"]["heuristic_minutes"] == 10
    assert cut["default/b"]["infeasible_minutes"] == 0
    assert sum(v["cost"] for v in cut.values()) >= ja["cost"] + jb["cost"] - 1e-12


def test_uncontended_intents_get_what_they_get_alone() -> None:
    big = [{"name": "big", "nodes": 4, "cpu": 16}]
    wls = [_workload("a", 300), _workload("b", 120)]
    both = oracle(_scenario(big, wls, [_intent("a", 0.3, P95), _intent("b", 0.9, P95)],
                            ["replicas", "cpu"]), 1)
    for n in "ab":
        alone = oracle(_scenario(big, wls, [_intent("a", 0.3, P95, n == "a"),
                                            _intent("b", 0.9, P95, n == "b")],
                                 ["replicas", "cpu"]), 1)[f"default/{n}"]
        assert both[f"default/{n}"]["cost"] == pytest.approx(alone["cost"])
        assert both[f"default/{n}"]["contended_minutes"] == 0


def test_pods_of_workloads_no_active_intent_drives_take_capacity() -> None:
    wls = [_workload("a", 200), _workload("shadow", 10, replicas=6)]
    out = oracle(_scenario(SMALL, wls, [_intent("a", 0.9, P95),
                                        _intent("shadow", 0.5, P95, active=False)],
                           ["replicas"]), 1)
    assert out["default/a"]["infeasible_minutes"] == 10   # 6 of its 8 cores are taken


def _brute_fits(pools: list[PoolSpec], groups: list[tuple[int, float, tuple[str, ...], int]]
                ) -> bool:
    """Brute force: every way of putting the pods on nodes."""
    names = [p.name for p in pools for _ in range(p.nodes)]
    cpu = [p.cpu for p in pools for _ in range(p.nodes)]
    gpus = [p.gpus for p in pools for _ in range(p.nodes)]
    pods = sorted(((g, c, e) for g, c, e, n in groups for _ in range(n)), key=lambda x: -x[1])

    def place(i: int) -> bool:
        if i == len(pods):
            return True
        g, c, elig = pods[i]
        for j in range(len(names)):
            if names[j] in elig and cpu[j] >= c - 1e-9 and gpus[j] >= g:
                cpu[j], gpus[j] = cpu[j] - c, gpus[j] - g
                ok = place(i + 1)
                cpu[j], gpus[j] = cpu[j] + c, gpus[j] + g
                if ok:
                    return True
        return False

    return place(0)


def _random_options(rng: random.Random, pools: list[PoolSpec], gpu: bool) -> list[Option]:
    out = []
    for order in range(rng.randint(0, 4)):
        device = "gpu" if gpu and rng.random() < 0.3 else "cpu"
        shape = Shape(rng.choice([0.5, 1.0, 2.0, 4.0]), device,
                      rng.choice([None, *(p.name for p in pools)]))
        elig = tuple(p.name for p in pools if shape.pool in (None, p.name)
                     and (device == "cpu" or p.gpus > 0))
        if elig:
            out.append(Option(shape, rng.randint(1, 4), round(rng.uniform(0.1, 2.0), 2),
                              order, elig))
    return out


def test_packing_is_sound_and_exact_when_pods_share_nodes() -> None:
    rng = random.Random(7)
    for _ in range(300):
        pools = [PoolSpec(name=n, nodes=rng.randint(1, 2), cpu=rng.choice([4.0, 8.0]),
                          gpus=rng.choice([0, 1, 2])) for n in ("x", "y")]
        chosen = _random_options(rng, pools, gpu=True)
        if sum(o.replicas for o in chosen) > 10:
            continue
        groups = [(1 if o.shape.device == "gpu" else 0, o.shape.cpu, o.pools, o.replicas)
                  for o in chosen]
        got, want = Packer(pools, []).fits(chosen), _brute_fits(pools, groups)
        assert want or not got                       # never claims a packing that is not
        if len({o.pools for o in chosen}) <= 1 and not any(g for g, *_ in groups):
            assert got == want                       # exact: CPU pods with the same nodes


def _cheapest(options: list[list[Option]], members: list[int], packer: Packer) -> float | None:
    """Brute force: the least total cost of one option per member that fits."""
    costs = [sum(o.cost_per_hour for o in combo)
             for combo in itertools.product(*(options[i] for i in members))
             if packer.fits(list(combo))]
    return min(costs) if costs else None


def test_joint_is_the_cheapest_fitting_combination_else_serves_by_priority() -> None:
    rng = random.Random(3)
    partial = 0
    for _ in range(150):
        pools = [PoolSpec(name="x", nodes=1, cpu=8.0), PoolSpec(name="y", nodes=1, cpu=4.0)]
        packer = Packer(pools, [])
        options = [_random_options(rng, pools, gpu=False) for _ in range(3)]
        priority = [rng.random() for _ in options]
        chosen, exact = joint([_prune(o) for o in options], priority, packer)
        assert exact
        assert packer.fits([o for o in chosen if o is not None])
        live = [i for i, o in enumerate(options) if o]
        full = _cheapest(options, live, packer)
        if full is not None:
            assert all(chosen[i] is not None for i in live)
            assert sum(o.cost_per_hour for o in chosen if o) == pytest.approx(full)
            continue
        partial += 1
        served: list[int] = []
        for i in sorted(live, key=lambda i: -priority[i]):
            if _cheapest(options, [*served, i], packer) is not None:
                served.append(i)
        assert sorted(i for i, o in enumerate(chosen) if o is not None) == sorted(served)
        assert sum(o.cost_per_hour for o in chosen if o) == \
            pytest.approx(_cheapest(options, served, packer))
    assert partial > 5                               # the priority rule was exercised


def _failing_scenario(failures_per_hour: float) -> Scenario:
    return _scenario(
        [{"name": "pool", "nodes": 2, "cpu": 16}],
        [_workload("a", 20, failure_rate_per_hour=failures_per_hour, restart_s=20,
                   detection_s=5)],
        [_intent("a", 0.8, [{"name": "p95", "value": 100, "measuredBy": "p95"},
                            {"name": "up", "value": 0.99, "measuredBy": "up"}])],
        ["replicas"],
        [_profile("p95", {"type": "latency", "percentile": 95}),
         _profile("up", {"type": "availability"})])


def test_availability_asks_for_a_second_replica_when_pods_fail_often() -> None:
    sc = _failing_scenario(6.0)
    w, pools = sc.spec.workloads[0], sc.spec.cluster.pools
    shape, fail = Shape(1.0, "cpu", None), Failures.of(w, 5.0)
    latency = Requirements(latency=((100.0, 0.95),), failures=fail)
    both = Requirements(latency=((100.0, 0.95),), min_availability=0.99, failures=fail)
    assert fewest_replicas(w, pools, shape, [20.0] * 12, latency, False, (1, 40)) == 1
    r = fewest_replicas(w, pools, shape, [20.0] * 12, both, False, (1, 40))
    assert r is not None and r > 1

    def avail(n: int) -> float:
        return expected_availability(w, shape, _pods(pools, shape, n), [20.0] * 12, False,
                                     fail)

    assert avail(r) >= 0.99 > avail(r - 1)
    failing, steady = oracle(sc, 1)["default/a"], oracle(_failing_scenario(0.0), 1)["default/a"]
    assert failing["infeasible_minutes"] == steady["infeasible_minutes"] == 0
    assert failing["core_hours"] > steady["core_hours"]
    # On average 0.99 holds, but a failure breaks the minute it falls in: said so.
    assert failing["uncovered"] == ["up"] and failing["availability_risk_minutes"] > 0
    assert steady["uncovered"] == [] and steady["availability_risk_minutes"] == 0


def test_expected_availability_follows_the_simulators_failures() -> None:
    sc = _failing_scenario(30.0)
    sim = SimulatedCluster(sc, seed=4, start_time=0.0)
    sim.scale("default/a", 2)
    served = offered = 0.0
    for _ in range(6 * 60 * 12):                      # 6 h of 5 s steps
        sim.step(5.0)
        r = sim.window("default/a", 5.0 + 1e-9)[-1]
        served += r.served * r.dt
        offered += (r.served + r.dropped) * r.dt
    w, pools = sc.spec.workloads[0], sc.spec.cluster.pools
    shape = Shape(1.0, "cpu", None)
    want = expected_availability(w, shape, _pods(pools, shape, 2), [20.0], False,
                                 Failures.of(w, 5.0))
    assert 1 - served / offered == pytest.approx(1 - want, rel=0.15)


def test_throughput_is_the_served_rate() -> None:
    w = _failing_scenario(0.0).spec.workloads[0]
    pools, shape = HET.spec.cluster.pools[:1], Shape(1.0, "cpu", "gen-old")
    need = Requirements(min_throughput=250.0)
    r = fewest_replicas(w, pools, shape, [300.0] * 12, need, False, (1, 40))
    assert r is not None

    def served(n: int) -> float:
        return served_rate(w, shape, _pods(pools, shape, n), 300.0, False)

    assert served(r) >= 250.0 > served(r - 1)
    # No configuration serves more than is offered.
    assert fewest_replicas(w, pools, shape, [200.0] * 12, need, False, (1, 40)) is None


def test_gpus_where_they_are_cheaper_per_request() -> None:
    path = ROOT / "examples/scenarios/multi-tenant.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["duration"] = "30m"
    # One GPU pod (25x a core) at 0.15/h serves a request for less than CPU pods do.
    doc["cluster"]["pools"][1]["cost_per_gpu_hour"] = 0.1
    with_gpu = oracle(parse_scenario(doc, str(path), path.parent), 1)["ml/inference"]
    doc["admin"]["devices"] = ["cpu"]
    cpu_only = oracle(parse_scenario(doc, str(path), path.parent), 1)["ml/inference"]
    assert cpu_only["gpu_hours"] == 0 and with_gpu["gpu_hours"] > 0
    assert with_gpu["cost"] < cpu_only["cost"]
    assert "us-gpu" in with_gpu["pools_used"]


def test_what_the_oracle_does_not_cover_is_named() -> None:
    shop = oracle(load_scenario(ROOT / "examples/scenarios/diurnal-shop.yaml"), 1)
    out = shop["shop/checkout"]
    assert out["uncovered"] == ["availability"] and out["availability_risk_minutes"] > 0
    assert "expectation" in out["notes"]["availability"]
    lines = uncovered_notes(shop)
    assert len(lines) == 1 and lines[0].startswith("shop/checkout availability:")
    # An objective it has no model for.
    sc = _scenario(SMALL, [_workload("a", 50)],
                   [_intent("a", 0.5, [*P95, {"name": "slow", "value": 10,
                                              "measuredBy": "slow"}])],
                   ["replicas"], [_profile("p95", {"type": "latency", "percentile": 95}),
                                  _profile("slow", {"type": "latency", "minimize": False})])
    res = oracle(sc, 1)["default/a"]
    assert res["uncovered"] == ["slow"] and "not modelled" in res["notes"]["slow"]
    assert res["infeasible_minutes"] == 0


def test_a_latency_margin_makes_the_oracle_plan_below_the_target() -> None:
    """gen-2131's p90 target sits close to the latency floor: held 10 % below it the oracle
    needs more pods, and without a margin it plans what it did before the option existed."""
    from bench import oracle_margin, slo

    plain, tight = oracle_margin.costs("generated:2131", [0.0, 0.1])
    assert plain == pytest.approx(sum(
        v["cost"] for v in oracle(slo.load("generated:2131"), 1).values()))
    assert tight > plain * 1.05


def test_the_switching_oracle_is_the_oracle_without_its_limits_and_keeps_them_with() -> None:
    """``bench/oracle_switching.py``: with changes allowed every minute, at no cost and any
    size, the cheapest shape sequence is the oracle's minute-by-minute choice (one intent: its
    cost and its shape changes exactly). Held to a cooldown, its changes are at least a
    cooldown apart and it costs more; with no room for a rolling step it never grows into
    another shape."""
    from itertools import pairwise

    from bench import oracle_switching, slo
    from bench.oracle import oracle

    sc = slo.load("generated:2793")          # bursts where the oracle switches to one GPU pod
    plain = next(iter(oracle(sc, 1).values()))
    free = next(iter(oracle_switching.switching(sc, 1, cooldown_s=0.0, startup_s=0.0,
                                                max_step=10_000).values()))
    assert free["cost"] == pytest.approx(plain["cost"], rel=1e-9) and free["missed"] == 0
    assert free["changes"] == plain["shape_changes"] >= 6
    minutes = free["change_minutes"]
    assert min(b - a for a, b in pairwise(minutes)) == 1
    held = next(iter(oracle_switching.switching(sc, 1, cooldown_s=600.0, startup_s=60.0,
                                                max_step=10_000).values()))
    minutes = held["change_minutes"]
    gaps = [b - a for a, b in pairwise(minutes)]
    assert held["changes"] >= 2 and min(gaps) >= 10, held
    assert held["cost"] > free["cost"]
    stuck = next(iter(oracle_switching.switching(sc, 1, cooldown_s=0.0, startup_s=0.0,
                                                 max_step=0).values()))
    # From 6 one-core pods, one GPU pod is fewer pods (reachable) but the way back to six or
    # more CPU pods is not: the GPU would be kept through the calm, so CPU pods stay.
    assert stuck["changes"] <= 1 and stuck["cost"] > free["cost"]
    cpu_only = next(iter(oracle_switching.switching(sc, 1, devices=("cpu",)).values()))
    assert cpu_only["gpu_minutes"] == 0 and cpu_only["cost"] > free["cost"]


def test_a_switching_step_pays_the_old_pods_ranks_kept_minutes_first_and_keeps_the_step() -> None:
    """One minute of the dynamic program on hand-made options: a change pays the old pods
    through the new ones' start-up; a state whose shape keeps nothing that minute counts a
    missed minute, which no saving outweighs; a change to more pods than a step adds is not
    taken; within the cooldown no change at all."""
    from bench.oracle import Option, Shape
    from bench.oracle_switching import _step

    a, b, c = Shape(1.0, "cpu", None), Shape(1.0, "gpu", None), Shape(2.0, "cpu", None)
    here = {a: Option(a, 10, 0.6, 0, ("p",)), b: Option(b, 1, 0.3, 1, ("g",)),
            c: Option(c, 30, 1.2, 2, ("p",))}
    new, parent = _step({(a, 5): (0, 0.0, 0, 0)}, here, hold=5, overlap_h=0.5, max_step=5)
    assert new[(a, 5)] == (0, pytest.approx(0.6 / 60), 0, 0)
    assert new[(b, 1)] == (0, pytest.approx(0.3 / 60 + 0.6 * 0.5), 1, 1)   # old pods paid
    assert (c, 1) not in new                       # 30 pods from 10: more than a step of 5
    assert parent[(b, 1)] == (a, 5)
    waiting, _ = _step({(a, 3): (0, 0.0, 0, 0)}, here, hold=5, overlap_h=0.5, max_step=50)
    assert set(waiting) == {(a, 4)}                 # within the cooldown: no change
    gone = {b: here[b]}                             # the current shape keeps nothing now
    new, _ = _step({(a, 5): (0, 0.0, 0, 0)}, gone, hold=5, overlap_h=0.5, max_step=5)
    assert new[(a, 5)][0] == 1 and new[(b, 1)][0] == 0
    assert min(new.values()) == new[(b, 1)]         # a kept minute beats any cost


# ---------------------------------------------------------------- where unpinned pods land

@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from([4, 8, 16, 32, 64]),
                          st.sampled_from([0, 2])), min_size=1, max_size=4),
       st.sampled_from([1.0, 2.0, 4.0]), st.booleans(), st.integers(1, 40))
def test_unpinned_pods_land_where_the_simulators_scheduler_puts_them(
        pools: list[tuple[int, int, int]], cpu: float, gpu: bool, replicas: int) -> None:
    """The oracle scores an unpinned workload's pods where the simulator's scheduler puts
    them (the emptiest node first): on nodes of several sizes the biggest take the first pods,
    which a spread in proportion to the pools' CPU gets wrong (e.g. a few pods on a cluster of
    one 64-core and six 32-core nodes)."""
    from bench.oracle import _mix

    assume(any(g > 0 for _, _, g in pools) or not gpu)
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml")
                                         .read_text())
    doc["cluster"]["pools"] = [{"name": f"p{k}", "nodes": n, "cpu": c, "gpus": g,
                                "speed": 1.0 + k / 4}
                               for k, (n, c, g) in enumerate(pools)]
    w = doc["workloads"][0]
    w.update(replicas=replicas, cpu=cpu, device="gpu" if gpu else "cpu")
    w.pop("pool", None)
    sc = parse_scenario(doc, "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0)
    sim.step(5)
    snap = sim.observe()
    pool_of = {n.name: n.pool for n in snap.nodes}
    placed = Counter(pool_of[p.node] for p in snap.workloads[w["namespace"] + "/" + w["name"]].pods
                     if p.node is not None)
    mix = _mix(sc.spec.cluster.pools, Shape(cpu, "gpu" if gpu else "cpu", None), replicas)
    total = sum(placed.values())
    assert {p.name: round(f * total) for p, f in mix if round(f * total)} == dict(placed)
