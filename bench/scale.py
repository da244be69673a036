"""Large simulated clusters (issue 13): where a controller cycle's CPU time goes as intents,
nodes and pods grow.

Builds a scenario in memory: ``--nodes`` nodes of 64 cores in 10 pools, ``--intents`` workloads
(one p95 latency intent each) of ``--pods`` one-core pods each, load at about 60 % of what the
pods serve with noise (so models have something to learn), the default planner. Per size:

* the wall time of building the simulated cluster and the controller;
* ``--warm`` simulated minutes first (models are trained there: the trainer fits each intent
  every 5 simulated minutes once it has 8 settled observations), then ``--cycles`` measured
  controller cycles with the simulated steps between them;
* the controller's CPU time per cycle, p50 and p99, also without the ``kpis`` phase (on the
  simulated backend that is the simulator's own KPI solve; on Kubernetes, Prometheus queries),
  and per phase (observe, kpis, plan, act, record, status, retention, hooks = training), from
  :mod:`planner.control.phases`; the simulator's own stepping apart;
* how many intents have a stored (trained) model, the process's peak RSS, the mean and largest
  size of the last cycle's event documents (BSON), the number and mean size of the pod-detail
  documents stored beside them (every pod, :func:`knowledge.documents.split_event`), and the
  events stored;
* growth over the measured cycles (issue 13's "no growth over 240 cycles"): for the cycle,
  the cycle without ``kpis``, each phase and the simulator, the mean CPU time of the first
  tenth of the measured cycles against the last tenth and the least-squares slope in ms per
  cycle (:func:`growth`); the process's current RSS when the measured cycles start and when
  they end, the simulated cluster's pods, and the events stored (and, on the embedded store,
  their BSON bytes) at both;
* ``--models copy``: trained models for every intent without fitting each
  (:func:`copy_models`);
* ``--shadow``: every intent in shadow mode (planned, recorded and reported, never acted on),
  so the pods stay as they are and the growth figures are the controller's own;
* the CPU the garbage collector takes per measured cycle (``--heap keeper``, the default: with
  the keeper the CLI and the operator install, :mod:`planner.control.heap`; ``--heap default``:
  CPython's collector left as it is);
* the scaling exponent of the controller cycle between the first and the last size
  (``log(t_last / t_first) / log(intents_last / intents_first)``).

    .venv/bin/python bench/scale.py [--sizes 10x50x200,100x500x200] [--warm 20] [--cycles 5]

A size is INTENTSxNODESxPODS (pods per workload).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

import bson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.control.phases import PHASES
from planner.models import effects
from planner.models.latency import QueueingLatencyRegressor
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

POOLS = 10
NODE_CORES = 64
"""Cores per node: the design size's 200,000 one-core pods fit 5,000 nodes with a third of the
cores free (with 32-core nodes they did not: 40,000 pods stayed Pending, every intent was
violated and contended for room every cycle, so the bench measured an overloaded cluster's
fallback and joint-planning paths instead of a steady cycle)."""
P95_MS = 100.0
"""The objective: met by a workload's pods at the bench's load (about 60 % utilisation, where
an M/M/1 pod's p95 is 3 ms + 75 ms), so the planner settles near ``--pods`` replicas. (At
60 ms the objective needed about 350 pods per workload.)"""


def scenario(intents: int, nodes: int, pods: int, shadow: bool = False,
             max_replicas: int | None = None) -> dict[str, Any]:
    """The bench's scenario; ``shadow``: every intent in shadow mode (``active: false``: planned
    and recorded, never acted on), so the cluster keeps its pods; ``max_replicas``: the
    admin's replica maximum (default twice the pods, at least 10)."""
    top = min(max(2 * pods, 10), 10_000) if max_replicas is None else max_replicas
    per_pool = max(1, nodes // POOLS)
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
         "metadata": {"name": "p95", "namespace": "big"},
         "spec": {"type": "latency", "percentile": 95}}]
    manifests += [
        {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
         "metadata": {"name": f"w{i}", "namespace": "big"},
         "spec": {"targetRef": {"kind": "Deployment", "name": f"w{i}"}, "active": not shadow,
                  "objectives": [{"name": "p95", "value": P95_MS, "measuredBy": "p95"}]}}
        for i in range(intents)]
    return {
        "name": f"scale-{intents}x{nodes}x{pods}", "duration": "30d", "step_s": 5,
        "cluster": {"pools": [{"name": f"p{i}", "nodes": per_pool, "cpu": NODE_CORES,
                               "cost_per_core_hour": 0.03 + 0.001 * i}
                              for i in range(POOLS)]},
        "workloads": [{"name": f"w{i}", "namespace": "big", "replicas": pods, "cpu": 1,
                       "service": {"rate_per_core": 100, "base_latency_ms": 3},
                       "trace": {"kind": "constant", "rate": 60.0 * pods, "noise": 0.15}}
                      for i in range(intents)],
        "admin": {"replicas": {"min": 1, "max": top, "maxStep": 100},
                  "cycleSeconds": 15},
        "manifests": manifests,
    }


def growth(series: list[float]) -> dict[str, float]:
    """How a per-cycle series (seconds) moved over the run: the mean of its first tenth of
    cycles and of its last tenth (at least one cycle each), in ms, and the least-squares
    slope against the cycle's index, in ms per cycle (0 for fewer than two cycles)."""
    n = len(series)
    if n == 0:
        return {"first_tenth_ms": 0.0, "last_tenth_ms": 0.0, "slope_ms_per_cycle": 0.0}
    k = max(1, n // 10)
    first = 1000.0 * sum(series[:k]) / k
    last = 1000.0 * sum(series[-k:]) / k
    slope = 0.0
    if n > 1:
        mx = (n - 1) / 2.0
        my = sum(series) / n
        sxx = sum((i - mx) ** 2 for i in range(n))
        slope = 1000.0 * sum((i - mx) * (y - my) for i, y in enumerate(series)) / sxx
    return {"first_tenth_ms": first, "last_tenth_ms": last, "slope_ms_per_cycle": slope}


def rss_mib() -> float:
    """The process's resident set size now (Linux ``/proc``), else its peak so far."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stored_event_bytes(knowledge: object) -> int | None:
    """The BSON bytes of every stored event on the embedded store (which keeps them encoded),
    else ``None``."""
    counted = getattr(knowledge, "event_bytes", None)
    return int(counted()) if callable(counted) else None


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)]


class CollectorClock:
    """CPU seconds CPython's cyclic garbage collector spends, and its collections (through
    ``gc.callbacks``), while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._start = 0.0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.collections += 1


def pod_count(run: ScenarioRun) -> int:
    """The simulated cluster's pods (canaries included): per-pod phases grow with them, so a
    growth over the measured cycles is read against this."""
    return sum(len(w.pods) + len(w.canary_pods) for w in run.sim.workloads.values())


def seen_pools(docs: list[dict[str, Any]]) -> frozenset[str]:
    """The node pools every latency model among ``docs`` (one intent's newest effect documents)
    saw pods on: the classes whose configurations it supports (no latency model: none)."""
    seen: frozenset[str] | None = None
    for doc in docs:
        model = effects.from_document(doc)
        if isinstance(model.estimator, QueueingLatencyRegressor):
            names = frozenset(model.classes[i] for i in model.estimator.seen_classes_)
            seen = names if seen is None else seen & names
    return seen or frozenset()


def copy_models(run: ScenarioRun) -> tuple[list[str], list[str]]:
    """Give every intent trained models without fitting each: intents are fitted only until
    each intent's pods run on node pools some fitted intent's models saw, and every other
    intent gets a copy of such an intent's newest models (the bench's workloads are alike, but
    a model vouches only for the node classes it saw: a copy that has not seen an intent's
    pools calls its every configuration unexplored and the planner explores instead of
    settling). An intent that cannot be fitted itself and whose pools no fitted intent saw all
    of gets the models that saw most of them. No refit during the measured cycles
    (:func:`measure` turns the trainer's schedule off before the warm-up). Training every
    intent of the largest size costs about 45 CPU minutes (2.7 s a fit, section 12 of
    ``docs/benchmarks.md``); what the measured cycles cost with trained models does not depend
    on who fitted them. Returns the intents fitted and the intents left uncovered, each in
    order."""
    if run.trainer is None:
        raise SystemExit("--models copy needs the controller's trainer")
    intents = run.source.intents()
    profiles = run.source.profiles()
    snapshot = run.sim.observe()
    donors: list[tuple[frozenset[str], list[dict[str, Any]]]] = []
    fitted: list[str] = []
    waiting: list[tuple[str, frozenset[str]]] = []
    for intent in intents:
        workload = snapshot.workload(intent.workload_key)
        pools = frozenset(p.pool for p in workload.pods if p.pool) if workload else frozenset()
        donor = next((d for seen, d in donors if pools <= seen), None)
        if donor is None and run.trainer.train(intent, profiles, run.sim.now()):
            fitted.append(intent.key)
            newest: dict[str, dict[str, Any]] = {}
            for doc in run.knowledge.effects(intent.key, with_blobs=True):
                newest.setdefault(doc["objective"], doc)
            donors.append((seen_pools(list(newest.values())), list(newest.values())))
            continue
        if donor is None:
            waiting.append((intent.key, pools))
            continue
        for doc in donor:
            run.knowledge.put_effect({**doc, "intent": intent.key})
    if not donors:
        raise SystemExit("no intent has enough settled observations for a model: warm longer")
    uncovered: list[str] = []
    for key, pools in waiting:
        seen, donor = max(donors, key=lambda d: len(pools & d[0]))
        if not pools <= seen:
            uncovered.append(key)
        for doc in donor:
            run.knowledge.put_effect({**doc, "intent": key})
    return fitted, uncovered


def measure(intents: int, nodes: int, pods: int, warm_min: float, cycles: int,
            progress: int = 0, keep_heap: bool = True, models: str = "learn",
            shadow: bool = False, max_replicas: int | None = None) -> dict[str, Any]:
    """One size (see the module docstring); every ``progress`` measured cycles (0: never) a
    line on stderr with that cycle's CPU and the RSS. ``models="copy"``: :func:`copy_models`
    after the warm-up."""
    t0 = time.perf_counter()
    run = ScenarioRun(parse_scenario(scenario(intents, nodes, pods, shadow, max_replicas),
                                     "scale"), "grid", 1,
                      keep_heap=keep_heap)
    built = time.perf_counter() - t0
    ctl = run.controller
    if models == "copy" and run.trainer is not None:
        run.trainer.interval_s = math.inf     # no fits in the warm-up: copy_models fits one
    w0 = time.perf_counter()
    while run.elapsed < warm_min * 60.0:
        run.advance()
    fitted, uncovered = copy_models(run) if models == "copy" else ([], [])
    warm_s = time.perf_counter() - w0
    per_cycle = round(run.cycle_s / run.step_s)
    cycle_cpu: list[float] = []
    product_cpu: list[float] = []
    sim_cpu: list[float] = []
    phase_cpu: dict[str, list[float]] = {k: [] for k in PHASES}
    rss_start = rss_mib()
    pods_start = pod_count(run)
    fits_start = run.trainer.trained if run.trainer is not None else 0
    events_start = run.knowledge.count_events()
    kb_bytes_start = stored_event_bytes(run.knowledge)
    collector = CollectorClock()
    gc.callbacks.append(collector)
    for _ in range(cycles):
        c0 = time.process_time()
        ctl_s = 0.0
        this = dict.fromkeys(PHASES, 0.0)
        for _ in range(per_cycle):
            outcomes = run.advance()
            if outcomes is not None:
                ctl_s += ctl.clock.total
                for k, v in ctl.clock.seconds.items():
                    this[k] = this.get(k, 0.0) + v
        total = time.process_time() - c0
        cycle_cpu.append(ctl_s)
        product_cpu.append(ctl_s - this["kpis"])
        sim_cpu.append(total - ctl_s)
        for k, v in this.items():
            phase_cpu.setdefault(k, []).append(v)
        if progress and len(cycle_cpu) % progress == 0:
            ph = " ".join(f"{k} {v:.3f}" for k, v in this.items())
            print(f"  {intents}x{nodes}x{pods} cycle {len(cycle_cpu)}/{cycles}: CPU "
                  f"{ctl_s:.3f}s, without the KPI solve {product_cpu[-1]:.3f}s ({ph}); "
                  f"simulator {sim_cpu[-1]:.3f}s; RSS {rss_mib():.0f} MiB",
                  file=sys.stderr, flush=True)
    gc.callbacks.remove(collector)
    if run.heap is not None:
        run.heap.close()
    rss_end = rss_mib()
    modelled = len({e["intent"] for e in run.knowledge.effects()})
    last = run.knowledge.events(limit=intents)
    sizes = [len(bson.encode(e)) for e in last]
    since = min((float(e["time"]) for e in last), default=None)
    detailed = [len(bson.encode(d)) for d in run.knowledge.pod_details(since=since)]
    return {
        "size": f"{intents}x{nodes}x{pods}", "intents": intents, "build_s": built,
        "warm_wall_s": warm_s, "cycle_p50_s": _pct(cycle_cpu, 0.5),
        "cycle_p99_s": _pct(cycle_cpu, 0.99),
        "without_kpis_p50_s": _pct(product_cpu, 0.5),
        "phases_s": {k: sum(v) / cycles for k, v in phase_cpu.items()},
        "simulator_s": _pct(sim_cpu, 0.5), "modelled": modelled,
        "gc_s": collector.seconds / cycles, "gc_collections": collector.collections / cycles,
        "keep_heap": keep_heap, "shadow": shadow,
        "max_replicas": run.scenario.spec.admin.replicas.max,
        "event_bytes": sum(sizes) / max(1, len(sizes)),
        "event_bytes_max": max(sizes, default=0),
        "pod_details": len(detailed),
        "pod_detail_bytes": sum(detailed) / max(1, len(detailed)),
        "events_stored": run.knowledge.count_events(),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "growth": {"cycle": growth(cycle_cpu), "without_kpis": growth(product_cpu),
                   **{k: growth(v) for k, v in phase_cpu.items()},
                   "simulator": growth(sim_cpu)},
        "rss_start_mib": rss_start, "rss_end_mib": rss_end,
        "pods_start": pods_start, "pods_end": pod_count(run),
        "copied_from": len(fitted), "copied_uncovered": len(uncovered),
        "fits": (run.trainer.trained if run.trainer is not None else 0) - fits_start,
        "events_stored_start": events_start,
        "kb_event_bytes_start": kb_bytes_start,
        "kb_event_bytes": stored_event_bytes(run.knowledge),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10x50x200,100x500x200")
    ap.add_argument("--warm", type=float, default=20.0,
                    help="simulated minutes before measuring (models are trained there)")
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--progress", type=int, default=0, metavar="N",
                    help="every N measured cycles, that cycle's CPU and the RSS on stderr")
    ap.add_argument("--heap", choices=("keeper", "default"), default="keeper",
                    help="the garbage-collector keeper the CLI and the operator install "
                         "(planner/control/heap.py), or CPython's collector left as it is")
    ap.add_argument("--models", choices=("learn", "copy"), default="learn",
                    help="learn: models are trained during the warm-up as the controller "
                         "trains them; copy: no fits in the warm-up, then intents are fitted "
                         "until their models have seen every intent's node pools and copied "
                         "to the others, with no refit while measuring (trained models at "
                         "1,000 intents without 45 minutes of fits)")
    ap.add_argument("--shadow", action="store_true",
                    help="every intent in shadow mode (active: false): planned, recorded and "
                         "reported, never acted on, so the pods stay as they are (the "
                         "controller's own growth over the cycles, apart from the cluster's)")
    ap.add_argument("--max-replicas", type=int, default=None, metavar="N",
                    help="the admin's replica maximum (default: twice the pods per workload): "
                         "the length of the planner's replica axis apart from the pods")
    args = ap.parse_args()
    rows = []
    for size in args.sizes.split(","):
        intents, nodes, pods = (int(x) for x in size.split("x"))
        row = measure(intents, nodes, pods, args.warm, args.cycles, args.progress,
                      keep_heap=args.heap == "keeper", models=args.models,
                      shadow=args.shadow, max_replicas=args.max_replicas)
        rows.append(row)
        if not args.json:
            ph = "  ".join(f"{k} {v:.3f}" for k, v in row["phases_s"].items())
            print(f"{row['size']}: build {row['build_s']:.1f}s, warm {row['warm_wall_s']:.0f}s "
                  f"wall; cycle CPU p50 {row['cycle_p50_s']:.3f}s p99 "
                  f"{row['cycle_p99_s']:.3f}s (without the simulated KPI solve p50 "
                  f"{row['without_kpis_p50_s']:.3f}s); simulator {row['simulator_s']:.2f}s/cycle; "
                  f"{row['modelled']}/{intents} with a trained model; event "
                  f"{row['event_bytes'] / 1024:.1f} KiB; {row['events_stored']} events; "
                  f"peak RSS {row['peak_rss_mib']:.0f} MiB", flush=True)
            print(f"    per phase (s/cycle): {ph}", flush=True)
            print(f"    the last cycle's events: {row['event_bytes_max']} bytes at most; "
                  f"{row['pod_details']} pod details beside them (every pod, kept apart), "
                  f"{row['pod_detail_bytes'] / 1024:.1f} KiB on average", flush=True)
            print(f"    garbage collector ({args.heap}): {row['gc_s']:.3f} s CPU and "
                  f"{row['gc_collections']:.1f} collections per cycle (in the phases above "
                  "and the simulator's stepping)", flush=True)
            print(f"    growth over {args.cycles} cycles (ms, mean of the first tenth -> the "
                  "last tenth; least-squares slope in ms/cycle):", flush=True)
            for name, g in row["growth"].items():
                print(f"      {name:<12} {g['first_tenth_ms']:10.1f} -> "
                      f"{g['last_tenth_ms']:10.1f}  slope {g['slope_ms_per_cycle']:+8.3f}",
                      flush=True)
            kb = ("" if row["kb_event_bytes"] is None else
                  f" ({row['kb_event_bytes_start'] / 2**20:.2f} -> "
                  f"{row['kb_event_bytes'] / 2**20:.2f} MiB of BSON)")
            print(f"    RSS {row['rss_start_mib']:.0f} -> {row['rss_end_mib']:.0f} MiB; pods "
                  f"{row['pods_start']} -> {row['pods_end']}; events "
                  f"stored {row['events_stored_start']} -> {row['events_stored']}{kb}",
                  flush=True)
    if len(rows) > 1 and rows[-1]["intents"] != rows[0]["intents"]:
        k = math.log(rows[-1]["cycle_p50_s"] / rows[0]["cycle_p50_s"]) / math.log(
            rows[-1]["intents"] / rows[0]["intents"])
        if args.json:
            rows.append({"scaling_exponent": k})
        else:
            print(f"scaling exponent {rows[0]['size']} -> {rows[-1]['size']}: {k:.2f}")
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
