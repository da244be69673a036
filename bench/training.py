"""Training cost at 1,000 intents (issue 13): CPU per fit, cold and warm-started; the CPU per
hour and the model freshness of training schedules; fits per second inline, in a process pool
and on a Dask LocalCluster.

1. Datasets: for ``--sample`` intents (the shipped scenarios' active latency objectives, each
   with several characterisation seeds) a characterisation study records ``--trials``
   observations (:func:`simulator.characterize.characterize`), as the trainer would read them.
2. CPU per fit (this thread's CPU time, as the trainer measures it): each dataset fitted cold
   (the trainer's job: full fit, validation probe, 8 bootstrap refits), and warm-started from
   a model of the same data without its newest ``--new-rows`` rows (five minutes of 15 s
   cycles); the validation error (MAPE, newest 20 % held out) of both.
3. Schedules at ``--intents`` intents over ``--hours`` hours, replayed with the trainer's own
   schedule (:func:`planner.control.training_schedule.choose` and its ledger): each intent is
   looked at every 5 minutes; it has new settled observations with probability
   ``--new-data-share``; a fit costs what a sampled dataset's cold fit measured. Printed: CPU
   seconds per hour (and cores), the mean and max model age at the looks.
4. Throughput: the sampled jobs run through the three backends - inline (this process),
   ``processes`` (``--workers`` worker processes) and ``dask`` (a LocalCluster of
   ``--workers`` worker processes) - with the wall time, fits per second and per worker.

    PYTHONPATH=. .venv/bin/python bench/training.py [--sample 16] [--trials 100] [--json]

The machine's other load shows in the wall times (not in the CPU times).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from knowledge.connect import open_knowledge_base  # noqa: E402
from planner.control import training_backends  # noqa: E402
from planner.control.training_schedule import CpuLedger, ModelState, choose  # noqa: E402
from planner.domain.admin import TrainingSettings  # noqa: E402
from planner.domain.intents import KPIType  # noqa: E402
from planner.models.fit_job import FitJob, FitResult, run_fit  # noqa: E402
from planner.models.latency import QueueingLatencyRegressor  # noqa: E402
from planner.models.observations import Dataset, dataset  # noqa: E402
from planner.models.training import SATURATED_UTILIZATION  # noqa: E402
from simulator.characterize import characterize  # noqa: E402
from simulator.scenario import load_scenario  # noqa: E402

SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))
LOOK_S = 300.0


def _subset(ds: Dataset, rows: np.ndarray) -> Dataset:
    return Dataset(ds.X[rows], ds.y[rows], ds.pools, ds.classes, ds.times[rows],
                   ds.utilization[rows], None if ds.window_utilization is None
                   else ds.window_utilization[rows])


def sample_jobs(n: int, trials: int) -> list[FitJob]:
    """``n`` fit jobs: the shipped scenarios' latency objectives, characterised with seeds
    1, 2, ... in turn."""
    targets = []
    for path in SCENARIOS:
        sc = load_scenario(path)
        profiles = {p.key: p for p in sc.profiles}
        for intent in sc.intents:
            if not intent.spec.active:
                continue
            for obj in intent.spec.objectives:
                prof = profiles[obj.profile_key(intent.metadata.namespace)]
                if prof.spec.type is KPIType.LATENCY:
                    targets.append((sc, intent, obj.name, prof.spec))
    jobs = []
    for i in range(n):
        sc, intent, objective, spec = targets[i % len(targets)]
        kb = open_knowledge_base(None)
        characterize(sc, intent.workload_key, trials, kb, seed=1 + i // len(targets),
                     train=False)
        ds = dataset(kb.events(intent.key), objective)
        jobs.append(FitJob(f"{intent.key}#{i}", objective, spec, ds, float(ds.times.max()), 8,
                           None, len(ds)))
    return jobs


def warm_versus_cold(jobs: list[FitJob], new_rows: int) -> list[dict[str, Any]]:
    rows = []
    for job in jobs:
        ds = job.dataset
        order = np.argsort(ds.times)
        old = _subset(ds, order[:max(len(order) - new_rows, 10)])
        q = job.spec.latency_percentile / 100.0
        previous = QueueingLatencyRegressor(quantile=q, n_bootstrap=0).fit(
            old.X, old.y, old.utilization >= SATURATED_UTILIZATION)
        cold = run_fit(job)
        warm = run_fit(FitJob(job.intent, job.objective, job.spec, ds, job.now,
                              job.min_samples, tuple(previous.theta_), job.new_rows))
        if cold.document is None or warm.document is None:
            continue
        rows.append({"intent": job.intent, "rows": len(ds), "cold_s": cold.cpu_s,
                     "warm_s": warm.cpu_s,
                     "cold_mape": cold.document["metadata"]["validation"]["mape"],
                     "warm_mape": warm.document["metadata"]["validation"]["mape"]})
    return rows


def replay(intents: int, hours: float, costs: list[float], errors: list[float],
           new_share: float, budget_s: float | None, every_look: bool,
           seed: int = 0) -> dict[str, Any]:
    """The schedule at ``intents`` intents: CPU per hour and model ages at the looks."""
    rng = random.Random(seed)
    cost = {f"i{k}": costs[k % len(costs)] for k in range(intents)}
    error = {f"i{k}": errors[k % len(errors)] for k in range(intents)}
    offset = {k: rng.uniform(0, LOOK_S) for k in cost}          # looks are staggered
    fitted: dict[str, float | None] = dict.fromkeys(cost)
    new: dict[str, int] = dict.fromkeys(cost, 0)
    ledger = CpuLedger()
    spent = 0.0
    ages: list[float] = []
    warmup = 3600.0
    cycle = 15.0
    t = 0.0
    end = warmup + hours * 3600.0
    while t < end:
        due = [k for k in cost if (t - offset[k]) % LOOK_S < cycle and t >= offset[k]]
        for k in due:
            if every_look or rng.random() < new_share:
                new[k] += 20
            if t >= warmup and fitted[k] is not None:
                ages.append(t - float(fitted[k] or 0.0))
        states = [ModelState(k, 1 if every_look else new[k], fitted[k], error[k],
                             cost[k] if fitted[k] is not None else None)
                  for k in cost if new[k] > 0 or every_look]
        if every_look:
            states = [s for s in states if s.intent in due]
        picked = choose(states, t, ledger.available(t, budget_s), ledger.mean_cost())
        for s in picked:
            ledger.charge(t, cost[s.intent])
            if t >= warmup:
                spent += cost[s.intent]
            fitted[s.intent] = t
            new[s.intent] = 0
        t += cycle
    arr = np.asarray(ages) if ages else np.asarray([math.inf])
    return {"cpu_s_per_hour": spent / hours, "cores": spent / hours / 3600.0,
            "age_mean_s": float(arr.mean()), "age_max_s": float(arr.max()),
            "never_fitted": sum(v is None for v in fitted.values())}


def throughput(jobs: list[FitJob], workers: int) -> list[dict[str, Any]]:
    out = []
    for name, settings in (("inline", TrainingSettings(executor="inline")),
                           ("processes", TrainingSettings(executor="processes",
                                                          workers=workers)),
                           ("dask", TrainingSettings(executor="dask", workers=workers))):
        t0 = time.perf_counter()
        backend = training_backends.create(settings, threaded=False)
        started = time.perf_counter() - t0
        if name != "inline":   # start the workers (imports) before timing the batch
            for h in [backend.submit([job]) for job in jobs[:workers]]:
                h.result()
        t1 = time.perf_counter()
        handles = [backend.submit([job]) for job in jobs]
        results: list[FitResult] = [r for h in handles for r in h.result()]
        wall = time.perf_counter() - t1
        backend.close()
        slots = 1 if name == "inline" else workers
        out.append({"backend": name, "workers": slots, "fits": len(results),
                    "start_s": started, "wall_s": wall, "fits_per_s": len(results) / wall,
                    "fits_per_s_per_worker": len(results) / wall / slots,
                    "cpu_s_per_fit": float(np.mean([r.cpu_s for r in results]))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=16)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--new-rows", type=int, default=20)
    ap.add_argument("--intents", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=3.0)
    ap.add_argument("--new-data-share", type=float, default=0.5,
                    help="chance an intent has new settled observations at a 5-minute look")
    ap.add_argument("--budgets", type=float, nargs="+", default=[3600.0, 7200.0, 14400.0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    jobs = sample_jobs(args.sample, args.trials)
    gen_s = time.perf_counter() - t0
    fits = warm_versus_cold(jobs, args.new_rows)
    costs = [r["cold_s"] for r in fits]
    errors = [r["cold_mape"] if r["cold_mape"] is not None else 1.0 for r in fits]
    schedules = []
    for label, budget, every, share in (
            ("every 5 min (before)", None, True, 1.0),
            ("only new data, all new", None, False, 1.0),
            (f"only new data, {args.new_data_share:.0%} new", None, False,
             args.new_data_share),
            *((f"budget {b:.0f} CPU s/h, all new", b, False, 1.0) for b in args.budgets)):
        schedules.append({"schedule": label, **replay(args.intents, args.hours, costs, errors,
                                                      share, budget, every)})
    runs = throughput(jobs, args.workers)
    report = {"sample": len(fits), "generate_s": gen_s, "fits": fits,
              "schedules": schedules, "throughput": runs}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    cold = np.array(costs)
    warm = np.array([r["warm_s"] for r in fits])
    dm = [abs((r["warm_mape"] or 0) - (r["cold_mape"] or 0)) for r in fits]
    print(f"{len(fits)} datasets ({np.mean([r['rows'] for r in fits]):.0f} rows on average, "
          f"generated in {gen_s:.0f} s)")
    print(f"CPU s per fit: cold mean {cold.mean():.2f} (p50 {np.median(cold):.2f}, max "
          f"{cold.max():.2f}); warm-started mean {warm.mean():.2f} "
          f"({(1 - warm.sum() / cold.sum()):+.0%} saved); validation MAPE cold "
          f"{np.mean([r['cold_mape'] or 0 for r in fits]):.3f} warm "
          f"{np.mean([r['warm_mape'] or 0 for r in fits]):.3f} (mean |diff| {np.mean(dm):.4f})")
    print(f"\n{args.intents} intents, {args.hours:g} h after a 1 h warm-up, looks every 5 min:")
    print(f"{'schedule':34} {'CPU s/h':>9} {'cores':>6} {'age mean':>9} {'age max':>9}")
    for s in schedules:
        print(f"{s['schedule']:34} {s['cpu_s_per_hour']:9.0f} {s['cores']:6.2f} "
              f"{s['age_mean_s'] / 60:7.1f} m {s['age_max_s'] / 60:7.1f} m"
              + (f"  ({s['never_fitted']} never fitted)" if s["never_fitted"] else ""))
    print(f"\n{len(jobs)} fits per backend ({args.workers} workers; wall clock on a shared "
          "machine):")
    print(f"{'backend':10} {'workers':>7} {'start s':>8} {'wall s':>7} {'fits/s':>7} "
          f"{'per worker':>10} {'CPU s/fit':>9}")
    for r in runs:
        print(f"{r['backend']:10} {r['workers']:7d} {r['start_s']:8.1f} {r['wall_s']:7.1f} "
              f"{r['fits_per_s']:7.2f} {r['fits_per_s_per_worker']:10.2f} "
              f"{r['cpu_s_per_fit']:9.2f}")


if __name__ == "__main__":
    main()
