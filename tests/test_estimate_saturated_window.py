"""The explicit estimate reads no base latency from a KPI window that saw the pods saturated:
the M/M/1 formula it fits (``base + ln(1/(1-q)) / (mu - lam)``) holds only below the queue's
bound, so what a percentile measured over such a window carries beyond the formula is the
saturated stretch's queueing, not base latency (gpu-inference: a first estimate read from a
window whose p95 was still an earlier overload's 5151 ms, fitted as the 200 ms cap of the base,
made every CPU pod count infeasible; docs/benchmarks.md section 63)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import WorkloadConfig
from planner.models.queue_estimate import MAX_UTILIZATION, QueueEstimate
from planner.planners.feedback import KPI_WINDOW_S
from planner.planners.online import recent_utilization, updated_estimate, window_peak
from planner.planners.predictors import PredictorMemory, PredictorSource
from tests.test_estimate_place import NOW, _ctx

CPU = WorkloadConfig(8, 1.0, "cpu", "gpu-pool")


def _at(cfg: WorkloadConfig, rate: float, util: float, p95: float, now: float):  # type: ignore[no-untyped-def]
    ctx = _ctx(cfg, rate, util)
    pods = tuple(dataclasses.replace(p, started_at=now - 3600.0) for p in ctx.workload.pods)
    wl = dataclasses.replace(ctx.workload, pods=pods)
    return dataclasses.replace(ctx, workload=wl, now=now, current={"p95": p95},
                               snapshot=dataclasses.replace(ctx.snapshot, time=now,
                                                            workloads={"ns/w": wl}))


def test_the_window_keeps_the_cycles_of_the_last_kpi_window() -> None:
    recent = ((NOW - 75.0, 0.99), (NOW - 60.0, 0.98), (NOW - 45.0, 0.5), (NOW + 5.0, 0.97))
    got = recent_utilization(recent, _ctx(CPU, 40.0, 0.3))
    # Older than the window, or later than now (the clock went back): left out.
    assert got == ((NOW - 45.0, 0.5), (NOW, 0.3))
    assert window_peak(got) == 0.5 and window_peak(()) is None
    # An unknown utilisation adds nothing.
    ctx = _ctx(CPU, 40.0, 0.3)
    unknown = dataclasses.replace(ctx, workload=dataclasses.replace(ctx.workload,
                                                                    cpu_utilization=None))
    assert recent_utilization(got, unknown) == ((NOW - 45.0, 0.5),)


@settings(max_examples=50, deadline=None)
@given(st.floats(0.05, 0.79), st.floats(0.0, 1.5), st.floats(1.0, 5000.0),
       st.booleans())
def test_no_base_is_read_from_a_window_that_saw_the_pods_saturated(
        util: float, peak: float, p95: float, first: bool) -> None:
    """Whatever the percentile: below the queue's bound over the window, the base is read as
    before; at or above it, the service rate is read from this cycle and the base is kept
    (none on a first estimate)."""
    ctx = dataclasses.replace(_ctx(CPU, 40.0, util), current={"p95": p95})
    before = None if first else QueueEstimate(9.0, 20.0, {"p95": 20.0}, ("cpu", "gpu-pool"),
                                              1.0)
    plain = updated_estimate(ctx, before)
    got = updated_estimate(ctx, before, max(peak, util))
    assert plain is not None and got is not None
    assert got.mu_per_core == pytest.approx(plain.mu_per_core)
    if max(peak, util) < MAX_UTILIZATION:
        assert got == plain
    elif first:
        assert got.bases == {} and got.base_ms == 0.0
    else:
        assert got.bases == {"p95": 20.0} and got.base_ms == 20.0


def test_the_planner_waits_for_a_calm_window_before_reading_the_base() -> None:
    """Cycle by cycle through the predictor source (memory written and read back each cycle,
    15 s apart): the pods saturated at 0.97, then at a tenth of a core while the p95 over the
    window still carries the overload (3 s): no base is fitted from it (without the window,
    the base's cap of 50 ms would be); once the saturated cycle is a whole window back, the
    90 ms p95 is read (its base: 90 ms less the queueing at a tenth)."""
    source, memory = PredictorSource(None), PredictorMemory().as_memory()
    seen: list[QueueEstimate | None] = []
    for k, (util, p95) in enumerate([(0.97, 3000.0), (0.1, 3000.0), (0.1, 3000.0),
                                     (0.1, 3000.0), (0.1, 90.0)]):
        mem = PredictorMemory.recall(memory)
        source.predictors(_at(CPU, 40.0, util, p95, NOW + 15.0 * k), mem)
        memory = mem.as_memory()
        seen.append(mem.estimate)
    assert seen[0] is None                       # saturated: nothing to read
    for est in seen[1:4]:
        assert est is not None and est.mu_per_core == pytest.approx(50.0)
        assert est.bases == {}
    assert KPI_WINDOW_S <= 15.0 * 4              # the saturated cycle has left the window
    last = seen[4]
    assert last is not None and last.bases == {
        "p95": pytest.approx(90.0 - 1000.0 * math.log(20.0) / (50.0 - 5.0))}


def test_the_window_is_memory_and_unreadable_records_are_dropped() -> None:
    mem = PredictorMemory(utilization=((NOW - 30.0, 0.95), (NOW, 0.4)))
    assert PredictorMemory.recall(mem.as_memory()).utilization == mem.utilization
    bad = mem.as_memory()
    bad["utilization"] = [*bad["utilization"], [NOW, "x"], [NOW], "ab", None, [NOW, math.nan]]
    assert PredictorMemory.recall(bad).utilization == mem.utilization
    assert PredictorMemory.recall({"utilization": "not a list"}).utilization == ()
    assert PredictorMemory.recall({}).utilization == (), "memory written before the window"
