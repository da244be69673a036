"""bench/scale.py's growth figures: first tenth against last tenth, the least-squares slope,
the stored events' bytes, and a tiny cluster measured end to end."""

from __future__ import annotations

import math

import bson
import pytest

from bench import scale
from knowledge.embedded import EmbeddedKnowledgeBase
from planner.control.phases import PHASES
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario


def test_growth_of_a_flat_series_is_none() -> None:
    g = scale.growth([0.25] * 40)
    assert g == {"first_tenth_ms": 250.0, "last_tenth_ms": 250.0, "slope_ms_per_cycle": 0.0}


def test_growth_of_a_linear_series_is_its_slope_and_its_tenths() -> None:
    # 50 cycles from 100 ms, 2 ms more each cycle: the first 5 average cycle 2 (104 ms), the
    # last 5 cycle 47 (194 ms).
    g = scale.growth([0.100 + 0.002 * i for i in range(50)])
    assert g["first_tenth_ms"] == pytest.approx(104.0)
    assert g["last_tenth_ms"] == pytest.approx(194.0)
    assert g["slope_ms_per_cycle"] == pytest.approx(2.0)


def test_growth_takes_one_cycle_a_tenth_on_short_runs_and_a_slope_through_noise() -> None:
    g = scale.growth([0.3, 0.1, 0.2, 0.1, 0.3])
    assert g["first_tenth_ms"] == pytest.approx(300.0)
    assert g["last_tenth_ms"] == pytest.approx(300.0)
    # x = 0..4, y - mean = (.1, -.1, 0, -.1, .1): sum (x - 2)(y - mean) = -.2 + .1 - .1 + .2 = 0
    assert g["slope_ms_per_cycle"] == pytest.approx(0.0, abs=1e-9)
    falling = scale.growth([0.5, 0.4, 0.45, 0.3, 0.2, 0.25, 0.1, 0.15, 0.05, 0.0, 0.1, 0.0])
    assert falling["first_tenth_ms"] == pytest.approx(500.0)
    assert falling["last_tenth_ms"] == pytest.approx(0.0)
    assert falling["slope_ms_per_cycle"] < 0


def test_growth_of_no_cycle_or_one() -> None:
    assert scale.growth([])["slope_ms_per_cycle"] == 0.0
    one = scale.growth([0.5])
    assert one == {"first_tenth_ms": 500.0, "last_tenth_ms": 500.0, "slope_ms_per_cycle": 0.0}


def test_stored_event_bytes_count_each_stored_event_once() -> None:
    kb = EmbeddedKnowledgeBase()
    assert scale.stored_event_bytes(kb) == 0
    docs = [{"intent": f"i{i % 3}", "time": float(i), "pad": "x" * (10 * i)} for i in range(9)]
    for d in docs:
        kb.record_event(d)
    assert scale.stored_event_bytes(kb) == sum(len(bson.encode(d)) for d in docs)
    assert scale.stored_event_bytes(object()) is None


def test_a_tiny_cluster_reports_growth_for_every_phase() -> None:
    row = scale.measure(2, 20, 2, 0.5, 10)
    g = row["growth"]
    assert set(g) == {"cycle", "without_kpis", "simulator", *PHASES}
    # the phases make up the cycle, cycle by cycle, so their tenths and slopes add up to its
    for key in ("first_tenth_ms", "last_tenth_ms", "slope_ms_per_cycle"):
        assert sum(g[p][key] for p in PHASES) == pytest.approx(g["cycle"][key], abs=1e-6)
        assert g["cycle"][key] - g["kpis"][key] == pytest.approx(
            g["without_kpis"][key], abs=1e-6)
    assert g["cycle"]["first_tenth_ms"] > 0 and math.isfinite(g["cycle"]["slope_ms_per_cycle"])
    assert row["rss_start_mib"] > 0 and 0 < row["rss_end_mib"] <= row["peak_rss_mib"] + 1
    # two intents, one event each per cycle: ten cycles add twenty events and their bytes
    assert row["events_stored"] - row["events_stored_start"] == 20
    assert row["kb_event_bytes"] > row["kb_event_bytes_start"]


@pytest.mark.parametrize(("intents", "nodes"), [(10, 50), (100, 500), (1000, 5000)])
def test_the_bench_cluster_holds_its_pods_and_they_meet_the_objective(intents: int,
                                                                     nodes: int) -> None:
    """The sizes the bench measures are a steady cluster, not an overloaded one: every
    workload's pods fit the nodes with room to spare, and at the bench's load they meet the
    p95 objective (an M/M/1 pod: base latency plus the sojourn's 95th percentile)."""
    doc = scale.scenario(intents, nodes, 200)
    cores = sum(p["nodes"] * p["cpu"] for p in doc["cluster"]["pools"])
    pods = sum(w["replicas"] * w["cpu"] for w in doc["workloads"])
    assert pods <= 0.75 * cores
    target = doc["manifests"][1]["spec"]["objectives"][0]["value"]
    for w in doc["workloads"]:
        mu = w["service"]["rate_per_core"] * w["cpu"]
        lam = w["trace"]["rate"] / w["replicas"]
        p95_ms = w["service"]["base_latency_ms"] + 1000.0 * math.log(20.0) / (mu - lam)
        assert lam < mu and p95_ms < target


def test_copied_models_give_every_intent_a_trained_model_and_no_refit() -> None:
    """``--models copy``: intents fitted after a warm-up without fits, their models stored for
    every intent, and nothing refitted while the cycles are measured."""
    row = scale.measure(10, 50, 200, warm_min=12.0, cycles=2, models="copy")
    assert row["modelled"] == 10
    assert 1 <= row["copied_from"] < 10
    assert row["pods_start"] >= 10 * 100 and row["pods_end"] >= 10 * 100
    assert row["fits"] == 0                  # no fit in the measured cycles


def test_every_copied_model_saw_the_node_pools_of_its_intent() -> None:
    """A copy vouches for the intent's pods: each intent given a copy has a latency model that
    saw every node pool its pods run on (else every configuration of the intent is unexplored
    to its model), unless no fitted intent saw them all (counted). On
    200 nodes the workloads' pods spread over different pools: one fitted intent's models do
    not cover them all."""
    run = ScenarioRun(parse_scenario(scale.scenario(20, 200, 100), "scale"), "grid", 1)
    assert run.trainer is not None
    run.trainer.interval_s = math.inf
    while run.elapsed < 12 * 60:
        run.advance()
    fitted, uncovered = scale.copy_models(run)
    snapshot = run.sim.observe()
    for intent in run.source.intents():
        docs = {d["objective"]: d for d in run.knowledge.effects(intent.key, with_blobs=True)}
        workload = snapshot.workload(intent.workload_key)
        assert workload is not None and docs
        pools = {p.pool for p in workload.pods if p.pool}
        if intent.key not in fitted + uncovered:        # a copy
            assert pools <= scale.seen_pools(list(docs.values())), intent.key
    assert len(fitted) > 1 and len(set(fitted)) == len(fitted)
    assert len(uncovered) < len(fitted)


def test_shadow_mode_plans_and_records_every_cycle_and_leaves_the_pods() -> None:
    """``--shadow``: the controller plans and records each intent every cycle, the cluster
    keeps its pods."""
    row = scale.measure(10, 50, 200, warm_min=2.0, cycles=3, shadow=True)
    assert row["shadow"] and row["pods_start"] == row["pods_end"] == 10 * 200
    assert row["events_stored"] - row["events_stored_start"] == 3 * 10
    assert row["phases_s"]["plan"] > 0 and row["phases_s"]["act"] == 0
