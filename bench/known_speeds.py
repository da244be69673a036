"""The default planner told every place's true speed from the start: how much of its cost over
the perfect-knowledge oracle is learning (which devices and pools are fast) and how much is the
rest (start-up delays, rolling updates, cooldowns, planning for the bound).

Every cycle, each (device, pool) the admin allows other than the one the workload started in
is given to the planner as if a canary had measured it beside the pods there: the simulator's
true service-rate ratio to that place (the GPU speed-up, the pools' ``speed``; an unpinned
place as the scheduler spreads pods, in proportion to the eligible pools' cores). So no canary
is needed and none is run. As for a measured canary, the models keep answering for the places
they already vouch for; the others are predicted as the start place at their speed
(:class:`planner.planners.canary.MeasuredShapes`), and a move to any of them counts as a move
to a measured place (:func:`planner.planners.canary.measured_move`: the hand-over holds the
work at the measured speed). The speed a plan carries for its target (``Plan.target_speed``,
which the safety layer reads as relative to the pods serving now) is the target's speed over
the current place's. Network latency per pool is not part of a speed, as it is not for a
measured canary.

    python bench/known_speeds.py --workers 2 \\
        --scenarios $(python bench/gpu_scenarios.py --seeds 201..3000)

One row per scenario (violation-minutes, cost and actions beside the oracle's cost, seed 1 of
the trace) and the totals.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import slo  # noqa: E402
from bench.oracle import Shape, _mix  # noqa: E402
from planner.domain.state import WorkloadConfig  # noqa: E402
from planner.planners import canary  # noqa: E402
from planner.planners.base import PlanningContext  # noqa: E402
from planner.planners.feedback import Explorer, Tried  # noqa: E402

_SCENARIO: dict[str, Any] = {}
"""The scenario this worker runs (set by :func:`run`)."""


def true_speed(scenario: Any, workload_key: str, cpu: float, device: str,
               pool: str | None) -> float | None:
    """The service-rate factor of ``workload_key``'s pods of ``cpu`` cores on ``device`` in
    ``pool`` (``None``: unpinned), relative to a CPU pod in a pool of speed 1; ``None`` where no
    pool can run such a pod."""
    spec = scenario.spec
    w = next(x for x in spec.workloads if x.key == workload_key)
    mix = _mix(spec.cluster.pools, Shape(cpu, device, pool))
    if not mix:
        return None
    device_factor = w.service.gpu_speedup if device == "gpu" else 1.0
    return device_factor * sum(share * p.speed for p, share in mix)


def known_speeds(ctx: PlanningContext, explorer: Explorer) -> dict[Tried, canary.Speed]:
    """Stands in for :func:`planner.planners.canary.measured_speeds`: every allowed place but
    the one the workload started in, at its true speed relative to that one (the place the
    models learned first, as a canary's speed is relative to the place it was measured
    beside)."""
    sc = _SCENARIO["scenario"]
    w = next(x for x in sc.spec.workloads if x.key == ctx.workload.key)
    cpu = ctx.config.cpu
    home = true_speed(sc, w.key, cpu, w.device, w.pool)
    if not home:
        return {}
    admin = sc.spec.admin
    pools = admin.pools or [p.name for p in sc.spec.cluster.pools]
    devices = [d for d in admin.devices if d == "cpu" or ctx.snapshot.facts.has_gpu]
    out: dict[Tried, canary.Speed] = {}
    for device in devices:
        for pool in (None, *pools):
            if (device, pool) == (w.device, w.pool):
                continue
            there = true_speed(sc, w.key, cpu, device, pool)
            if there:
                out[(device, pool)] = canary.Speed((w.device, w.pool), there / home)
    return out


def known_speed_of(ctx: PlanningContext, explorer: Explorer, target: WorkloadConfig
                   ) -> float | None:
    """Stands in for :func:`planner.planners.canary.speed_of`: ``target``'s true speed over
    the current place's (``None`` for the current place itself)."""
    sc = _SCENARIO["scenario"]
    cfg = ctx.config
    if (target.device, target.pool) == (cfg.device, cfg.pool):
        return None
    here = true_speed(sc, ctx.workload.key, target.cpu, cfg.device, cfg.pool)
    there = true_speed(sc, ctx.workload.key, target.cpu, target.device, target.pool)
    return there / here if here and there else None


def run(ref: str, seed: int) -> dict[str, Any]:
    """``grid`` on ``ref`` with :func:`known_speeds` and :func:`known_speed_of`, and the
    oracle's cost."""
    _SCENARIO["scenario"] = slo.load(ref)
    canary.measured_speeds = known_speeds
    canary.speed_of = known_speed_of
    out = slo.run_one(ref, "grid", seed, 0, None)
    out["oracle_cost"] = slo.oracle_totals(ref, seed)["cost"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="+", required=True,
                    help="scenario files or generated:<seed> references")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(run, args.scenarios, [args.seed] * len(args.scenarios)))
    print(f"{'scenario':<24}{'violation-min':>14}{'cost':>10}{'actions':>9}{'oracle':>10}"
          f"{'ratio':>8}")
    for ref, r in zip(args.scenarios, rows, strict=True):
        print(f"{ref:<24}{r['violation_minutes']:>14}{r['cost']:>10.3f}{r['actions']:>9}"
              f"{r['oracle_cost']:>10.3f}{r['cost'] / r['oracle_cost']:>8.2f}")
    viol = sum(r["violation_minutes"] for r in rows)
    cost = sum(r["cost"] for r in rows)
    actions = sum(r["actions"] for r in rows)
    ref_cost = sum(r["oracle_cost"] for r in rows)
    print(f"{'total':<24}{viol:>14}{cost:>10.3f}{actions:>9}{ref_cost:>10.3f}"
          f"{cost / ref_cost:>8.2f}")


if __name__ == "__main__":
    main()
