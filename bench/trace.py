"""Trace one scenario run cycle by cycle: what each intent observed, what its plan wanted, why.

The figures of ``bench/slo.py`` say *that* a run violated or cost more; this says *when* and
*why*, one line per intent per cycle (or every ``--every`` cycles), so a mechanism found on a
generated scenario can be reproduced by anyone from a command::

    .venv/bin/python bench/trace.py generated:43 --planner grid --seed 1 --every 4
    .venv/bin/python bench/trace.py examples/scenarios/flash-sale.yaml --from 600 --to 1800

Columns: simulated minute, intent, replicas (ready/pending), CPU size, device, pool, the
canary's shape if one runs, the observed KPIs (``!`` marks a violated objective), the plan's
target and the first ``--reason-chars`` characters of its reason. ``--json`` prints one JSON
object per line instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import slo  # noqa: E402


def shape(cfg: Any) -> str:
    """``replicas x cpu device@pool`` of a :class:`WorkloadConfig`."""
    pool = f"@{cfg.pool}" if cfg.pool else ""
    return f"{cfg.replicas}x{cfg.cpu:g}{'' if cfg.device == 'cpu' else ' ' + cfg.device}{pool}"


def row(minute: float, outcome: Any) -> dict[str, Any]:
    """What one cycle did for one intent, as a flat dict."""
    key = outcome.intent.key
    plan = outcome.plan
    kpis = {name: (None if value is None else round(float(value), 4))
            for name, value in outcome.current.items()}
    return {
        "minute": round(minute, 2),
        "intent": key,
        "current": None if plan is None else shape(plan.current),
        "target": None if plan is None else shape(plan.target),
        "kpis": kpis,
        "violated": sorted(n for n, ok in outcome.met.items() if ok is False),
        "applied": list(outcome.applied),
        "cost_per_hour": None if plan is None or plan.cost_per_hour is None
        else round(plan.cost_per_hour, 4),
        "reason": "" if plan is None else plan.reason,
        "errors": list(outcome.errors) + ([outcome.planner_error] if outcome.planner_error
                                          else []),
    }


def pods_line(sim: Any, workload_key: str) -> str:
    """``ready/pending`` pods of a workload, and its canary's shape if one runs."""
    wl = sim.observe().workload(workload_key)
    if wl is None:
        return "-"
    ready = sum(1 for p in wl.pods if p.ready)
    pending = sum(1 for p in wl.pods if p.node is None)
    text = f"{ready}r/{pending}p"
    if wl.canary is not None:
        text += f" canary {shape(wl.canary.config)}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="a scenario YAML or generated:<seed>[:tight]")
    parser.add_argument("--planner", default="grid", help="planner spec (grid, hpa@60, ...)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--every", type=int, default=1, help="print every Nth cycle")
    parser.add_argument("--from", dest="start", type=float, default=0.0,
                        help="first simulated second to print")
    parser.add_argument("--to", type=float, default=None,
                        help="last simulated second (the run stops there; totals up to it)")
    parser.add_argument("--intent", default=None, help="only this intent (namespace/name)")
    parser.add_argument("--violated", action="store_true",
                        help="only cycles where an objective is observed violated")
    parser.add_argument("--reason-chars", type=int, default=160)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)

    from simulator.runner import ScenarioRun

    scenario = slo.load(args.scenario)
    run = ScenarioRun(scenario, args.planner, args.seed)
    targets = {i.key: i.workload_key for i in scenario.intents}
    cycle = 0

    def on_cycle(sim: Any, outcomes: list[Any]) -> None:
        nonlocal cycle
        cycle += 1
        t = sim.elapsed
        if cycle % args.every or t < args.start or (args.to is not None and t > args.to):
            return
        for o in outcomes:
            if args.intent is not None and o.intent.key != args.intent:
                continue
            r = row(t / 60.0, o)
            if args.violated and not r["violated"]:
                continue
            r["pods"] = pods_line(sim, targets.get(o.intent.key, o.intent.key))
            if args.json:
                print(json.dumps(r), flush=True)
                continue
            kpis = " ".join(f"{n}={'-' if v is None else f'{v:.4g}'}"
                            f"{'!' if n in r['violated'] else ''}"
                            for n, v in r["kpis"].items())
            print(f"{r['minute']:7.2f} {r['intent']:<24} {r['current'] or '-':<16} "
                  f"{r['pods']:<10} -> {r['target'] or '-':<16} {kpis}  "
                  f"{r['reason'][:args.reason_chars]}", flush=True)

    report = run.run(duration=args.to, on_cycle=on_cycle).as_dict()
    print(json.dumps({"totals": report["totals"]}) if args.json else
          f"# totals: {json.dumps(report['totals'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
