"""``bench/known_speeds.py``: the default planner told every place's true speed. The speeds it
hands the planner are the simulator's service-rate ratios to the place the workload started in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from planner.planners.feedback import Explorer
from simulator.cluster import SimulatedCluster
from simulator.scenario import parse_scenario
from tests.support.gpu_trial import gpu_trial


def test_every_other_place_is_given_at_its_true_speed_relative_to_the_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import known_speeds

    doc = gpu_trial(30.0, 0.3)
    doc["cluster"]["pools"][0]["speed"] = 2.0          # "general": twice as fast a core
    sc = parse_scenario(doc, "t")
    monkeypatch.setitem(known_speeds._SCENARIO, "scenario", sc)
    snap = SimulatedCluster(sc, seed=1, start_time=0.0).observe()
    wl = snap.workloads["ml/infer"]
    # Wherever the workload runs now, speeds are relative to where it started (cpu, general).
    ctx = SimpleNamespace(config=wl.config.with_(device="gpu", pool="gpu"), workload=wl,
                          snapshot=snap)
    speeds = known_speeds.known_speeds(ctx, Explorer())       # type: ignore[arg-type]
    assert ("cpu", "general") not in speeds
    assert {s.reference for s in speeds.values()} == {("cpu", "general")}
    assert speeds[("gpu", "gpu")].factor == pytest.approx(30.0 / 2.0)
    assert speeds[("gpu", None)].factor == pytest.approx(30.0 / 2.0)   # GPUs only there
    assert speeds[("cpu", "gpu")].factor == pytest.approx(0.5)
    # Unpinned CPU pods spread over both pools by their cores: 128 of 160 at speed 2.
    assert speeds[("cpu", None)].factor == pytest.approx((0.8 * 2.0 + 0.2 * 1.0) / 2.0)
    assert ("gpu", "general") not in speeds                            # no GPU there
    # The speed a plan carries for its target is relative to the pods serving now (the
    # safety layer's hand-over reads it so): from the GPU pool's CPU pods, not the start.
    here = ctx.config.with_(device="cpu", pool="gpu")
    now = SimpleNamespace(config=here, workload=wl, snapshot=snap)
    to = here.with_(pool="general")
    assert known_speeds.known_speed_of(now, Explorer(), to) == pytest.approx(2.0)  # type: ignore[arg-type]
    assert known_speeds.known_speed_of(now, Explorer(), here) is None  # type: ignore[arg-type]
