"""Training speed of the learned latency model: one fit (the full fit plus its bootstrap
refits) with the finite-difference Jacobian evaluated in one vectorised pass, against scipy's
one-parameter-at-a-time evaluation, in the same process on the same observations.

For each shipped scenario's latency objectives a characterisation study records observations
at random configurations and loads; both variants fit them, alternating, ``--repeat`` times.
CPU time per fit, the ratio, and whether the fitted parameters are identical are printed.

    python bench/fit.py [--trials 60] [--repeat 3] [--utilization] [--json]

``--utilization`` fits on the pods' serving devices' utilisation too (as training does since it is
recorded); without it, on latency alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from knowledge.connect import open_knowledge_base  # noqa: E402
from planner.domain.intents import KPIType  # noqa: E402
from planner.models.latency import QueueingLatencyRegressor  # noqa: E402
from planner.models.observations import dataset  # noqa: E402
from simulator.characterize import characterize  # noqa: E402
from simulator.scenario import load_scenario  # noqa: E402

SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))


def _fit(X: Any, y: Any, q: float, batched: bool,
         util: Any = None) -> tuple[float, QueueingLatencyRegressor]:
    QueueingLatencyRegressor._batched_jacobian = batched
    t = time.process_time()
    est = QueueingLatencyRegressor(quantile=q).fit(X, y, utilization=util)
    return time.process_time() - t, est


def measure(path: Path, trials: int, repeat: int,
            utilization: bool = False) -> list[dict[str, Any]]:
    sc = load_scenario(path)
    rows = []
    profiles = {p.key: p for p in sc.profiles}
    for intent in sc.intents:
        if not intent.spec.active:
            continue
        kb = open_knowledge_base(None)
        characterize(sc, intent.workload_key, trials, kb, seed=7, train=False)
        events = kb.events(intent.key)
        for obj in intent.spec.objectives:
            prof = profiles[obj.profile_key(intent.metadata.namespace)]
            if prof.spec.type is not KPIType.LATENCY:
                continue
            ds = dataset(events, obj.name)
            q = prof.spec.latency_percentile / 100.0
            times: dict[bool, list[float]] = {True: [], False: []}
            fitted: dict[bool, QueueingLatencyRegressor] = {}
            for _ in range(repeat):
                for batched in (False, True):
                    dt, fitted[batched] = _fit(ds.X, ds.y, q, batched,
                                               ds.service_utilization if utilization else None)
                    times[batched].append(dt)
            QueueingLatencyRegressor._batched_jacobian = True
            same = (np.array_equal(fitted[True].theta_, fitted[False].theta_)
                    and np.array_equal(fitted[True].bootstrap_thetas_,
                                       fitted[False].bootstrap_thetas_))
            one, many = float(np.median(times[False])), float(np.median(times[True]))
            rows.append({"scenario": sc.name, "intent": intent.key, "objective": obj.name,
                         "rows": len(ds.y), "classes": int(fitted[True].n_classes_),
                         "scipy_s": round(one, 3), "batched_s": round(many, 3),
                         "speedup": round(one / many, 2), "identical": bool(same)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--utilization", action="store_true",
                    help="fit on the pods' serving devices' utilisation too, as training does")
    args = ap.parse_args()
    rows = [r for p in SCENARIOS for r in measure(p, args.trials, args.repeat,
                                                   args.utilization)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'scenario':14} {'objective':12} {'rows':>5} {'K':>2} {'scipy s':>8} "
          f"{'batched s':>9} {'speed-up':>8}  identical")
    for r in rows:
        print(f"{r['scenario']:14} {r['objective']:12} {r['rows']:5d} {r['classes']:2d} "
              f"{r['scipy_s']:8.3f} {r['batched_s']:9.3f} {r['speedup']:7.2f}x  "
              f"{r['identical']}")
    total_one = sum(r["scipy_s"] for r in rows)
    total_many = sum(r["batched_s"] for r in rows)
    print(f"all fits: scipy {total_one:.2f} s, batched {total_many:.2f} s "
          f"(x{total_one / max(total_many, 1e-9):.2f} faster); identical parameters: "
          f"{sum(r['identical'] for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
