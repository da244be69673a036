"""The device left to the planner against the device pinned, on one scenario and several seeds.

Each run is the scenario with every active intent's ``spec.useCase.device`` set to ``auto``,
``cpu`` or ``gpu`` (an intent without a use case gets one of class ``bench``); everything else
is the scenario's. Per run: violation-minutes, cost, GPU-hours, and which device ran at low and
at high load (the load of each cycle's event against the run's median load).

    python bench/device_pins.py                                   # gpu-inference, seeds 1-3
    python bench/device_pins.py --scenario generated:4009 --seeds 1 2 --workers 2 --json
    python bench/device_pins.py --days 4        # four days back to back, figures per day

``auto`` is issue 15's bar: less cost than either pinned device, objectives kept.

``--days N`` runs the scenario's duration (its day) N times back to back in one run: the
trace goes on (a diurnal trace whose period is the duration repeats its day) and the
knowledge base is kept, as in production, where the planner meets a day it has seen
before. Each day's violation-minutes, cost and GPU-hours are printed apart: the first day
includes learning every device from nothing, the later ones show what the learned models
buy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.slo import START, load  # noqa: E402

DEFAULT_SCENARIO = str(ROOT / "examples" / "scenarios" / "gpu-inference.yaml")
DEVICES = ("auto", "cpu", "gpu")


def pinned(scenario: Any, device: str) -> Any:
    """``scenario`` with every active intent's use case asking for ``device``."""
    from planner.domain.intents import UseCase
    from simulator.scenario import Scenario

    intents = []
    for intent in scenario.intents:
        uc = intent.spec.use_case or UseCase.model_validate({"class": "bench", "name": "run"})
        spec = intent.spec.model_copy(update={"use_case": uc.model_copy(
            update={"device": device})})
        intents.append(intent.model_copy(update={"spec": spec}))
    return Scenario(scenario.spec, intents, scenario.profiles, scenario.base_dir)


def _totals(tallies: dict[str, Any], keys: set[str]) -> dict[str, float]:
    """Violation-minutes, cost and GPU-hours summed over the intents ``keys`` so far."""
    mine = [t for k, t in tallies.items() if k in keys]
    return {"violation_minutes": sum(sum(o.violation_minutes for o in t.objectives.values())
                                     for t in mine),
            "cost": sum(t.cost for t in mine), "gpu_hours": sum(t.gpu_hours for t in mine)}


def run(ref: str, device: str, seed: int, duration: float | None,
        days: int = 1) -> dict[str, Any]:
    from knowledge.connect import open_knowledge_base
    from simulator.runner import ScenarioRun

    sc = pinned(load(ref, duration), device)
    day_s = float(sc.spec.duration)
    kb = open_knowledge_base(None)
    t0 = time.perf_counter()
    active = [i for i in sc.intents if i.spec.active]
    keys = {i.key for i in active}
    sim = ScenarioRun(sc, None, seed, kb, start_time=START)
    per_day: list[dict[str, float]] = []
    before = _totals({}, keys)
    for day in range(1, max(1, days) + 1):
        sim.run(day * day_s)
        now = _totals(sim.accountant.tallies, keys)
        per_day.append({k: round(now[k] - before[k], 3) for k in now})
        before = now
    report = sim.report(time.perf_counter() - t0).as_dict()
    intents = {k: v for k, v in report["intents"].items() if k in keys}
    low = {"cpu": 0, "gpu": 0}
    high = {"cpu": 0, "gpu": 0}
    for intent in active:
        events = [e for e in kb.events(intent.key) if e["load"].get("request_rate") is not None]
        if not events:
            continue
        median = statistics.median(e["load"]["request_rate"] for e in events)
        for e in events:
            band = low if e["load"]["request_rate"] <= median else high
            band[e["config"]["device"]] = band.get(e["config"]["device"], 0) + 1
    return {
        "scenario": sc.name, "device": device, "seed": seed,
        "violation_minutes": sum(v["violation_minutes"] for v in intents.values()),
        "minutes": sum(o["minutes"] for v in intents.values() for o in v["objectives"].values()),
        "cost": round(sum(v["cost"] for v in intents.values()), 3),
        "gpu_hours": round(sum(v["gpu_hours"] for v in intents.values()), 3),
        "core_hours": round(sum(v["core_hours"] for v in intents.values()), 3),
        "actions": sum(v["actions"] for v in intents.values()),
        "gpu_share_low_load": round(low["gpu"] / max(1, sum(low.values())), 3),
        "gpu_share_high_load": round(high["gpu"] / max(1, sum(high.values())), 3),
        "wall_s": round(time.perf_counter() - t0, 1),
        **({"days": per_day} if days > 1 else {}),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for device in DEVICES:
        mine = [r for r in rows if r["device"] == device]
        if mine:
            out[device] = {k: round(sum(r[k] for r in mine), 3)
                           for k in ("violation_minutes", "minutes", "cost", "gpu_hours")}
    return out


def summarise_days(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """Per device, each day's figures summed over the seeds (runs with ``--days`` > 1)."""
    out: dict[str, list[dict[str, float]]] = {}
    for device in DEVICES:
        mine = [r["days"] for r in rows if r["device"] == device and "days" in r]
        if mine:
            out[device] = [{k: round(sum(d[i][k] for d in mine), 3) for k in mine[0][i]}
                           for i in range(len(mine[0]))]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default=DEFAULT_SCENARIO,
                    help="a scenario file or generated:<seed> (default: gpu-inference)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--devices", nargs="+", choices=DEVICES, default=list(DEVICES))
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: scenario's)")
    ap.add_argument("--days", type=int, default=1,
                    help="run the scenario's duration this many times back to back, knowledge "
                         "kept, and print each day's figures (default: 1)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.days < 1:
        ap.error(f"--days must be at least 1, got {args.days}")
    jobs = [(args.scenario, d, s, args.duration, args.days)
            for s in args.seeds for d in args.devices]
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        rows = list(pool.map(run, *zip(*jobs, strict=True)))
    total = summarise(rows)
    days = summarise_days(rows)
    if args.json:
        print(json.dumps({"runs": rows, "total": total, **({"days": days} if days else {})},
                         indent=1))
        return 0
    print(f"{'device':6} {'seed':>4} {'viol-min':>8} {'cost':>8} {'GPU-h':>6} "
          f"{'GPU low':>7} {'GPU high':>8} {'wall s':>6}")
    for r in rows:
        print(f"{r['device']:6} {r['seed']:>4} {r['violation_minutes']:>8} {r['cost']:>8.3f} "
              f"{r['gpu_hours']:>6.2f} {r['gpu_share_low_load']:>7.2f} "
              f"{r['gpu_share_high_load']:>8.2f} {r['wall_s']:>6.0f}")
    for device, t in total.items():
        print(f"total {device:5}: {t['violation_minutes']:g} violation-minutes of "
              f"{t['minutes']:g}, cost {t['cost']:.3f}, {t['gpu_hours']:.2f} GPU-h")
    for device, per in days.items():
        print(f"per day {device:5}: " + "; ".join(
            f"day {i}: {d['violation_minutes']:g} viol-min, cost {d['cost']:.3f}"
            for i, d in enumerate(per, 1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
