"""SLO attainment and cost: our planner against the HPA baseline and the IDO-style A* planner.

For every shipped scenario and several seeds, runs each planner on the same simulator and the
same trace, and prints violation-minutes, core-hours, cost, actions and plan latency, plus the
ratios ours/hpa and ours/astar. ``grid+char`` is the default planner after a characterisation
study (``intent-planner characterize``) seeded the knowledge base; ``grid`` starts cold.
Totals count active intents only (a shadow-mode intent is never acted on by any planner).

    python bench/slo.py [--seeds 1 2 3] [--planners hpa astar grid grid+char] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))
START = 1_767_225_600.0


def run_one(path: str, planner: str, seed: int, trials: int,
            duration: float | None) -> dict[str, Any]:
    from knowledge.connect import open_knowledge_base
    from simulator.characterize import characterize
    from simulator.runner import ScenarioRun
    from simulator.scenario import load_scenario

    sc = load_scenario(path)
    kb = open_knowledge_base(None)
    name = planner
    if planner.endswith("+char"):
        name = planner.removesuffix("+char")
        for w in {i.workload_key for i in sc.intents if i.spec.active}:
            characterize(sc, w, trials, kb, seed=seed + 100, end_time=START)
    t0 = time.perf_counter()
    report = ScenarioRun(sc, name, seed, kb, start_time=START).run(duration).as_dict()
    active = {i.key for i in sc.intents if i.spec.active}
    intents = {k: v for k, v in report["intents"].items() if k in active}
    return {
        "scenario": sc.name, "planner": planner, "seed": seed,
        "violation_minutes": sum(v["violation_minutes"] for v in intents.values()),
        "minutes": sum(o["minutes"] for v in intents.values() for o in v["objectives"].values()),
        "core_hours": sum(v["core_hours"] for v in intents.values()),
        "cost": sum(v["cost"] for v in intents.values()),
        "actions": sum(v["actions"] for v in intents.values()),
        "plan_ms_p50": report["totals"]["plan_ms_p50"],
        "plan_ms_p99": report["totals"]["plan_ms_p99"],
        "wall_s": time.perf_counter() - t0,
    }


def oracle_totals(path: str, seed: int) -> tuple[float, float, int]:
    """(core-hours, cost, infeasible minutes) of the perfect-knowledge reference
    (``bench/oracle.py``) over the scenario's active intents."""
    from bench.oracle import oracle
    from simulator.scenario import load_scenario

    per = oracle(load_scenario(path), seed).values()
    return (sum(v["core_hours"] for v in per), sum(v["cost"] for v in per),
            sum(v["infeasible_minutes"] for v in per))


def summarise(rows: list[dict[str, Any]], planners: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"per_scenario": {}, "totals": {}}
    for r in rows:
        d = out["per_scenario"].setdefault(r["scenario"], {}).setdefault(r["planner"], {
            "violation_minutes": 0, "core_hours": 0.0, "cost": 0.0, "actions": 0, "runs": 0,
            "plan_ms_p50": [], "plan_ms_p99": []})
        for k in ("violation_minutes", "core_hours", "cost", "actions"):
            d[k] += r[k]
        d["runs"] += 1
        d["plan_ms_p50"].append(r["plan_ms_p50"])
        d["plan_ms_p99"].append(r["plan_ms_p99"])
    for p in planners:
        sel = [r for r in rows if r["planner"] == p]
        out["totals"][p] = {
            "violation_minutes": sum(r["violation_minutes"] for r in sel),
            "objective_minutes": sum(r["minutes"] for r in sel),
            "core_hours": round(sum(r["core_hours"] for r in sel), 2),
            "cost": round(sum(r["cost"] for r in sel), 3),
            "actions": sum(r["actions"] for r in sel),
            "plan_ms_p99_max": max((r["plan_ms_p99"] for r in sel), default=0.0),
        }
    for s in out["per_scenario"].values():
        for d in s.values():
            d["plan_ms_p50"] = round(max(d["plan_ms_p50"]), 2)
            d["plan_ms_p99"] = round(max(d["plan_ms_p99"]), 2)
            d["core_hours"] = round(d["core_hours"], 2)
            d["cost"] = round(d["cost"], 3)
    t = out["totals"]
    ratios = {}
    for ours in [p for p in planners if p.startswith("grid")]:
        for ref in ("hpa", "astar"):
            if ref in t and ours in t:
                vm_ref = t[ref]["violation_minutes"]
                ratios[f"{ours}/{ref}"] = {
                    "violation_minutes": round(t[ours]["violation_minutes"] / vm_ref, 3)
                    if vm_ref else None,
                    "core_hours": round(t[ours]["core_hours"] / t[ref]["core_hours"], 3),
                    "cost": round(t[ours]["cost"] / t[ref]["cost"], 3),
                }
    out["ratios"] = ratios
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--planners", nargs="+", default=["hpa", "astar", "grid", "grid+char"])
    ap.add_argument("--scenarios", nargs="+", default=[str(p) for p in SCENARIOS])
    ap.add_argument("--characterize-trials", type=int, default=40)
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: scenario)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    jobs = [(s, p, seed, args.characterize_trials, args.duration)
            for s in args.scenarios for seed in args.seeds for p in args.planners]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(run_one, *zip(*jobs, strict=True)))
    summary = summarise(rows, args.planners)
    refs = [oracle_totals(s, seed) for s in args.scenarios for seed in args.seeds]
    summary["oracle_core_hours"] = round(sum(r[0] for r in refs), 2)
    summary["oracle_cost"] = round(sum(r[1] for r in refs), 3)
    summary["oracle_infeasible_minutes"] = sum(r[2] for r in refs)
    summary["runs"] = rows
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    summary["seeds"] = args.seeds
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
        return
    print(f"{'scenario':<14} {'planner':<12} {'viol-min':>8} {'core-h':>8} {'cost':>7} "
          f"{'actions':>7} {'plan p50':>9} {'plan p99':>9}")
    for scen, per in summary["per_scenario"].items():
        for p in args.planners:
            d = per[p]
            print(f"{scen:<14} {p:<12} {d['violation_minutes']:>8} {d['core_hours']:>8.2f} "
                  f"{d['cost']:>7.3f} {d['actions']:>7} {d['plan_ms_p50']:>8.2f}ms "
                  f"{d['plan_ms_p99']:>8.2f}ms")
    print(f"\ntotals over {len(args.seeds)} seed(s) x {len(args.scenarios)} scenario(s):")
    for p, d in summary["totals"].items():
        print(f"  {p:<12} violation-min {d['violation_minutes']:>5} of {d['objective_minutes']}"
              f"  core-h {d['core_hours']:>8}"
              f"  cost {d['cost']:>7}  actions {d['actions']:>5}  "
              f"worst plan p99 {d['plan_ms_p99_max']:.2f} ms")
    print(f"  {'oracle':<12} core-h {summary['oracle_core_hours']:>8}  cost "
          f"{summary['oracle_cost']:>7}  infeasible minutes "
          f"{summary['oracle_infeasible_minutes']}  (every latency objective kept with perfect "
          "knowledge of load and workload, instant start-up: bench/oracle.py)")
    for p, d in summary["totals"].items():
        print(f"  {p}/oracle{'':<{max(0, 11 - len(p))}} core-h "
              f"x{d['core_hours'] / max(summary['oracle_core_hours'], 1e-9):.3f}  cost "
              f"x{d['cost'] / max(summary['oracle_cost'], 1e-9):.3f}")
    for k, v in summary["ratios"].items():
        print(f"  {k:<18} violation-min x{v['violation_minutes']}  core-h x{v['core_hours']}  "
              f"cost x{v['cost']}")
    print(f"wall time {summary['wall_s']} s")


if __name__ == "__main__":
    main()
