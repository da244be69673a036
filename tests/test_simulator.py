from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.domain.intents import KPIType
from simulator.accounting import Accountant
from simulator.cluster import SimulatedCluster
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario, parse_scenario
from simulator.traces import BurstyTrace, CsvTrace, DiurnalTrace, StepTrace
from tests.support.runs import SharedRun, shared_run_params

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))


def small_scenario(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml")
                                         .read_text())
    doc["duration"] = "20m"
    doc.update(overrides)
    return doc


def test_shipped_scenarios_load(scenario_path: Path) -> None:
    sc = load_scenario(scenario_path)
    assert sc.intents and sc.profiles and sc.spec.workloads


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A run report without its wall-clock figures."""
    report.pop("wall_s")
    for i in report["intents"].values():
        i.pop("plan_ms_p50"), i.pop("plan_ms_p99")
    report["totals"].pop("plan_ms_p50"), report["totals"].pop("plan_ms_p99")
    return report


@pytest.mark.parametrize("scenario_path", shared_run_params(SCENARIOS))
def test_deterministic_for_a_seed(scenario_path: Path,
                                  shared_run: Callable[[Path], SharedRun]) -> None:
    """Two runs with one seed report the same, after 5 and after 15 minutes; another seed
    reports differently when the scenario has noise. The first run is the one ``shared_run``
    shares with other tests (seed 1; reports taken on its way). The other seed runs 5 minutes
    only: a seed that makes no difference makes none in the first 5 minutes either, so a run
    ignoring its seed still fails the check."""
    sc = load_scenario(scenario_path)
    shared = shared_run(scenario_path)
    a5, a15 = (_comparable(shared.report_at(t)) for t in (300, 900))
    b, c = ScenarioRun(sc, seed=shared.run.seed), ScenarioRun(sc, seed=shared.run.seed + 1)
    b5, c5 = (_comparable(r.run(duration=300).as_dict()) for r in (b, c))
    b15 = _comparable(b.run(duration=900).as_dict())
    assert a5["duration_s"] == c5["duration_s"] == 300 and a15["duration_s"] == 900
    assert a5 == b5
    assert a15 == b15
    assert a5 != c5 or "noise" not in scenario_path.read_text()


def test_traces() -> None:
    assert StepTrace(10, [(60, 50), (120, 5)]).rate(30) == 10
    assert StepTrace(10, [(60, 50), (120, 5)]).rate(60) == 50
    assert StepTrace(10, [(60, 50), (120, 5)]).rate(500) == 5
    d = DiurnalTrace(100, 50, 3600)
    assert d.rate(900) == pytest.approx(150)
    assert d.rate(2700) == pytest.approx(50)
    b = BurstyTrace(10, 100, mean_gap=300, burst_duration=60, horizon=7200, seed=1)
    rates = [b.rate(t) for t in range(0, 7200, 5)]
    assert set(rates) == {10, 100}
    assert BurstyTrace(10, 100, 300, 60, 7200, seed=1).rate(1234) == b.rate(1234)


def test_csv_trace(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("timestamp,rate\n1000,10\n1060,70\n1120,10\n")
    t = CsvTrace(f)
    assert t.rate(30) == pytest.approx(40)
    assert t.rate(120 + 30) == pytest.approx(40)  # loops
    bad = tmp_path / "bad.csv"
    bad.write_text("time,rps\n0,1\n1,2\n")
    with pytest.raises(ValueError, match="missing column"):
        CsvTrace(bad)


def test_pods_start_after_startup_delay() -> None:
    sc = parse_scenario(small_scenario(), "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0)
    sim.scale("shop/checkout", 6)
    sim.step(5)
    snap = sim.observe().workloads["shop/checkout"]
    assert len(snap.pods) == 6 and snap.ready_replicas == 4
    for _ in range(4):
        sim.step(5)
    assert sim.observe().workloads["shop/checkout"].ready_replicas == 6


def test_resize_is_a_rolling_update() -> None:
    sc = parse_scenario(small_scenario(), "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0)
    sim.resize("shop/checkout", 2.0)
    sim.step(5)
    pods = sim.observe().workloads["shop/checkout"].pods
    assert sum(p.ready for p in pods) >= 4  # old pods keep serving
    for _ in range(6):
        sim.step(5)
    pods = sim.observe().workloads["shop/checkout"].pods
    assert len(pods) == 4 and all(p.cpu == 2.0 and p.ready for p in pods)


def test_failures_restart_pods_and_cost_availability() -> None:
    doc = small_scenario()
    doc["workloads"][0]["service"]["failure_rate_per_hour"] = 30.0
    doc["workloads"][0]["service"]["detection_s"] = 5
    sc = parse_scenario(doc, "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0)
    for _ in range(120):
        sim.step(5)
    pods = sim.observe().workloads["shop/checkout"].pods
    assert sum(p.restarts for p in pods) > 0
    intent = sc.intents[0]
    avail = next(p for p in sc.profiles if p.spec.type is KPIType.AVAILABILITY)
    value = sim.measure(intent, avail)
    assert value is not None and value < 1.0


def test_scheduling_respects_capacity() -> None:
    doc = small_scenario()
    doc["cluster"]["pools"] = [{"name": "tiny", "nodes": 1, "cpu": 4}]
    sc = parse_scenario(doc, "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0)
    sim.scale("shop/checkout", 10)
    sim.step(5)
    pods = sim.observe().workloads["shop/checkout"].pods
    assert sum(1 for p in pods if p.node is not None) == 4
    assert sim.observe().nodes[0].cpu_allocated == 4


def test_latency_kpi_reflects_load() -> None:
    sc = parse_scenario(small_scenario(), "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0, measurement_noise=0.0)
    lat = next(p for p in sc.profiles if p.spec.type is KPIType.LATENCY)
    for _ in range(12):
        sim.step(5)
    low = sim.measure(sc.intents[0], lat)
    sim.scale("shop/checkout", 2)
    for _ in range(12):
        sim.step(5)
    high = sim.measure(sc.intents[0], lat)
    assert low is not None and high is not None and high > low


def test_core_hours_are_accounted_per_node_pool() -> None:
    """A workload's core-hours are split by the pools its pods ran in, and add up to its
    core-hours: with more pods than the first pool holds, both pools count."""
    doc = small_scenario()
    doc["cluster"]["pools"] = [{"name": "a", "nodes": 1, "cpu": 4},
                               {"name": "b", "nodes": 1, "cpu": 8}]
    sc = parse_scenario(doc, "t", ROOT / "examples/scenarios")
    sim = SimulatedCluster(sc, start_time=0.0)
    accountant = Accountant(sim, sc.intents, {p.key: p for p in sc.profiles})
    (key,) = accountant.tallies
    tally = accountant.tallies[key]
    for replicas in (2, 6):                     # 2 pods fit in one pool, 6 do not
        sim.scale(tally.workload, replicas)
        for _ in range(12):
            sim.step(5)
            accountant.after_step(5)
        if replicas == 2:
            assert len(tally.pool_core_hours) == 1
    assert set(tally.pool_core_hours) == {"a", "b"}
    assert sum(tally.pool_core_hours.values()) == pytest.approx(tally.core_hours)
    assert tally.as_dict()["pool_core_hours"] == {
        p: round(h, 3) for p, h in sorted(tally.pool_core_hours.items())}


def test_observed_pod_metrics_are_each_pods_window_means(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A pod's CPU utilisation and request rate in ``observe()`` are the time-weighted means
    over the steps it served within the metrics window, added step by step as a per-pod loop
    adds them (checked exactly against such a loop over what each step's queueing solve
    returned, by pod name), through scale-outs, a resize, restarts, a canary and steps of
    uneven length; a ready pod that served no step of the window reports no rate, a pod not
    ready 0 and no rate."""
    import simulator.cluster as cluster
    from simulator import queueing

    doc = small_scenario()
    doc["workloads"][0]["service"]["failure_rate_per_hour"] = 60.0
    sim = SimulatedCluster(parse_scenario(doc, "t", ROOT / "examples/scenarios"),
                           start_time=0.0)
    steps: list[tuple[float, float, list[str], list[float], list[float]]] = []
    names: list[str] = []
    real_shares, real_outcome = cluster.dispatch_shares, queueing.step_outcome

    def shares(ready: list[str], weights: dict[str, int]) -> Any:
        names[:] = ready
        return real_shares(ready, weights)

    def outcome(*args: Any) -> Any:
        out = real_outcome(*args)
        served = (out.served_per_pod if out.served_per_pod is not None
                  else [0.0] * len(names))
        steps.append((sim.time, dt, list(names), [float(u) for u in out.utilization],
                      [float(r) for r in served]))
        return out

    monkeypatch.setattr(cluster, "dispatch_shares", shares)
    monkeypatch.setattr(queueing, "step_outcome", outcome)
    checked = not_ready = canaries = 0
    for i in range(90):
        dt = (5.0, 3.0, 7.0)[i % 3]
        if i == 10:
            sim.scale("shop/checkout", 9)
        if i == 30:
            sim.resize("shop/checkout", 2.0)
        if i == 45:
            sim.set_canary("shop/checkout", sim.workloads["shop/checkout"].config.with_(
                replicas=2, cpu=1.0))
        if i == 60:     # pods numbered after the canary's: serving order is not pod order
            sim.scale("shop/checkout", 11)
        sim.step(dt)
        t = sim.time
        start = t - sim.metrics_window_s
        seen = sim.observe().workloads["shop/checkout"]
        for pod in seen.pods + (seen.canary.pods if seen.canary is not None else ()):
            span = busy = rate = 0.0
            for at, step_dt, who, util, served in steps:
                if at >= start and pod.name in who:
                    k = who.index(pod.name)
                    span += step_dt
                    busy += step_dt * util[k]
                    rate += step_dt * served[k]
            if not pod.ready:
                assert (pod.cpu_utilization, pod.request_rate) == (0.0, None)
                not_ready += 1
            elif span > 0:
                assert (pod.cpu_utilization, pod.request_rate) == (busy / span, rate / span)
                checked += 1
                canaries += "canary" in pod.name
            else:
                assert pod.request_rate is None
    assert checked > 300 and not_ready > 5 and canaries > 20
