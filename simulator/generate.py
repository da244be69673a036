"""Random but realistic scenarios from a seed: workloads the planner has never seen.

:func:`generate` returns the document a scenario YAML file holds (validated by
:func:`simulator.scenario.parse_scenario`), drawn with ``numpy.random.default_rng(seed)`` only,
so the same seed always gives the same document. It draws:

* load shapes: diurnal, bursts (``bursty``), steps, flash crowds (10x within 60 s, a step
  trace), bounded random walks and the shipped recorded trace (``csv``), with noise;
* services: requests per core, how CPU scales (``cpu_exponent``), GPU speed-up (around the
  price ratio, so GPUs are sometimes the cheaper way to serve a request), base latency,
  start-up 5-90 s, failures;
* clusters: node generations of different speed and price, GPU pools, regions with network
  latency and their own prices, sometimes tight capacity;
* the admin's actuators (only those the cluster makes meaningful) and bounds;
* intents: latency at p50/p90/p95/p99, availability, throughput, priorities; sometimes two or
  three workloads competing for one small pool (one that holds their summed peak need, 1-1.4x;
  ``contention="tight"`` draws one that does not, below).

Targets are derived from the service itself, never from a planner: a latency target is the
simulator's own quantile (:mod:`simulator.queueing`) of one reference pod (the best pod shape
and pool the admin's knobs reach, base and network latency included) at a drawn utilisation
between 30 and 80 %, so some configuration meets it whenever the cluster has the capacity. A
throughput target is a share of the least load the trace offers.

**Options.** ``generate(seed, contention="tight")`` (``intent-planner generate --seed N
--contention tight``, ``bench/slo.py --generated N --contention tight``) always draws two or
three workloads competing for one pool (no GPU, no other pool), and sizes that pool below
their summed peak need. A workload's *peak need* is the cores its reference pods (the ones its
latency targets were derived from) need at the peak rate of its trace (noise-free; a random
walk's upper bound), at its tightest latency objective's drawn utilisation; ``S`` is the sum
over the workloads and ``L`` the largest. The pool holds whole nodes of at least ``S - L`` and
below ``S`` cores: a point drawn uniformly in that range, rounded to whole nodes of the drawn
node size (where those miss the range, of the first halving of it whose nodes land in it,
down to 2 cores and the largest pod the admin's knobs allow; failing that, as many nodes of
the largest pod's size as stay below ``S``). So if the workloads peaked together, not all of
them would fit, while all but the largest would (in about half of the draws the largest alone
needs more than the pool). Their peaks need not coincide: how often the pool actually runs
short depends on the load shapes, which are drawn as without the option. The intents'
priorities are drawn as always but redrawn on a tie, so that priority always orders them. A
seed that draws a shared pool without the option draws the same workloads, intents, knobs and
bounds with it: only the pool's nodes differ (unless two priorities tie: the redraw shifts
what is drawn after it). The scenario is named ``gen-<seed>-tight``. Without the option
(``contention=None``) the document is exactly what it was before the option existed
(``tests/test_generate.py`` pins it).

A ``csv`` trace names its file relative to ``examples/scenarios`` (:data:`SCENARIO_DIR`): parse
a generated document with ``base_dir=SCENARIO_DIR``, or :func:`relocate` it first to where the
document will be written.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator import queueing
from simulator.traces import CsvTrace

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
"""Where the shipped scenarios and their recorded traces are; ``csv`` files are relative to it."""
CSV_TRACES = ("traces/inference-2h.csv",)
CONTENTION = ("tight",)
"""What ``generate(seed, contention=...)`` accepts besides ``None`` (the default draw)."""
SHAPES = ("diurnal", "bursty", "step", "flash", "random_walk", "csv")
PERCENTILES = (50, 90, 95, 99)
CPU_SIZES = (0.25, 0.5, 1.0, 2.0, 4.0)
REGIONS = ("eu-west", "us-east", "ap-south", "eu-north", "us-west")
NAMESPACES = ("shop", "search", "ml", "media", "payments", "analytics", "tenant-a", "tenant-b")
NAMES = ("checkout", "catalog", "search", "inference", "thumbnails", "recommend", "auth",
         "ingest", "transcode", "reports", "pricing", "feed", "chat", "geo")
API_VERSION = "intent-planner.io/v1alpha1"


@dataclass
class _Load:
    trace: dict[str, Any]
    low: float
    """Least rate the trace offers (req/s, noise-free)."""
    peak: float
    initial: float
    what: str


@dataclass
class _Pool:
    name: str
    region: str
    speed: float
    cpu: float
    cost_per_core_hour: float
    network_latency_ms: float
    gpus: int = 0
    cost_per_gpu_hour: float = 0.0
    need_cores: float = 0.0

    def doc(self, nodes: int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "region": self.region, "nodes": nodes,
                               "cpu": self.cpu, "speed": self.speed,
                               "cost_per_core_hour": self.cost_per_core_hour,
                               "network_latency_ms": self.network_latency_ms}
        if self.gpus:
            out.update(gpus=self.gpus, cost_per_gpu_hour=self.cost_per_gpu_hour)
        return out


@dataclass
class _Workload:
    name: str
    namespace: str
    service: dict[str, Any]
    load: _Load
    cpu: float
    pool: str | None
    pods_at_peak: float = 0.0
    """Reference pods the peak needs at the tightest objective's utilisation."""
    pods_at_start: float = 0.0
    need_cores: float = 0.0
    """Cores the reference pods need at the peak (``pods_at_peak`` x their CPU size)."""
    notes: list[str] = field(default_factory=list)


def _r(x: float, digits: int = 2) -> float:
    """``x`` to ``digits`` significant digits (documents stay readable)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def draw_service(rng: np.random.Generator, rate_per_core: float) -> dict[str, Any]:
    """A workload's service parameters after its ``rate_per_core`` (the draws in this order:
    every generator that shares it keeps its scenarios when it moves here)."""
    return {
        "rate_per_core": rate_per_core,
        "cpu_exponent": _r(rng.uniform(0.6, 1.0)),
        "base_latency_ms": _r(_log_uniform(rng, 0.5, 30.0)),
        "startup_s": int(rng.integers(5, 91)),
        "failure_rate_per_hour": 0.0 if _chance(rng, 0.4) else
        _r(_log_uniform(rng, 0.005, 0.3)),
        "restart_s": int(rng.integers(10, 61)),
    }


def _chance(rng: np.random.Generator, p: float) -> bool:
    return bool(rng.random() < p)


# ------------------------------------------------------------------------------ load shapes
def _load(rng: np.random.Generator, shape: str, peak: float, duration: float) -> _Load:
    noise = _r(rng.uniform(0.02, 0.12))
    if shape == "diurnal":
        swing = rng.uniform(0.3, 0.9)
        base = peak / (1 + swing)
        amplitude = base * swing
        period = duration if _chance(rng, 0.6) else duration / 2
        phase = _r(rng.uniform(-math.pi, math.pi), 3)
        return _Load({"kind": "diurnal", "base": _r(base, 3), "amplitude": _r(amplitude, 3),
                      "period": period, "phase": phase, "noise": noise},
                     _r(base, 3) - _r(amplitude, 3), peak, base + amplitude * math.sin(phase),
                     f"diurnal {base - amplitude:.0f}-{peak:.0f} req/s")
    if shape == "bursty":
        base = peak / rng.uniform(2.0, 5.0)
        gap = float(rng.integers(8, 31)) * 60
        length = float(rng.integers(2, 11)) * 60
        return _Load({"kind": "bursty", "base": _r(base, 3), "burst_rate": _r(peak, 3),
                      "mean_gap": gap, "burst_duration": length, "noise": noise},
                     _r(base, 3), peak, base,
                     f"bursts {base:.0f} -> {peak:.0f} req/s for {length / 60:.0f} min "
                     f"every ~{gap / 60:.0f} min")
    if shape == "step":
        initial = peak * rng.uniform(0.2, 0.5)
        n = int(rng.integers(2, 6))
        times = sorted(float(t) for t in rng.choice(
            np.arange(300, int(duration) - 300, 60), size=n, replace=False))
        rates = [peak * rng.uniform(0.2, 1.0) for _ in range(n)]
        rates[int(rng.integers(0, n))] = peak
        steps = [{"at": t, "rate": _r(r, 3)} for t, r in zip(times, rates, strict=True)]
        return _Load({"kind": "step", "initial": _r(initial, 3), "steps": steps, "noise": noise},
                     min(initial, *rates), peak, initial,
                     f"{n} steps between {min(initial, *rates):.0f} and {peak:.0f} req/s")
    if shape == "flash":
        base = peak / 10
        crowd: list[dict[str, Any]] = []
        t = float(rng.integers(10, 30)) * 60
        crowds = 0
        while t < duration - 600 and crowds < 3:
            hold = float(rng.integers(5, 21)) * 60
            # 10x within a minute, a plateau, then down in two steps.
            for dt, factor in ((0, 3), (20, 6), (40, 10), (40 + hold, 4), (100 + hold, 1)):
                crowd.append({"at": t + dt, "rate": _r(base * factor, 3)})
            crowds += 1
            t += 100 + hold + float(rng.integers(15, 60)) * 60
        return _Load({"kind": "step", "initial": _r(base, 3), "steps": crowd, "noise": noise},
                     _r(base, 3), peak, base,
                     f"{crowds} flash crowd(s) {base:.0f} -> {peak:.0f} req/s within 60 s")
    if shape == "random_walk":
        low = peak / rng.uniform(3.0, 10.0)
        initial = _log_uniform(rng, low, peak)
        vol = _r(rng.uniform(0.3, 1.5))
        interval = float(rng.choice([30, 60, 120]))
        return _Load({"kind": "random_walk", "initial": _r(initial, 3), "low": _r(low, 3),
                      "high": _r(peak, 3), "volatility": vol, "interval": interval,
                      "noise": noise},
                     _r(low, 3), peak, initial,
                     f"random walk {low:.0f}-{peak:.0f} req/s (volatility {vol}/h)")
    if shape == "csv":
        file = CSV_TRACES[int(rng.integers(0, len(CSV_TRACES)))]
        raw = CsvTrace(SCENARIO_DIR / file)
        samples = [raw.base_rate(float(s)) for s in range(0, int(duration) + 1, 10)]
        scale = _r(peak / max(samples), 3)
        return _Load({"kind": "csv", "file": file, "scale": scale, "noise": noise},
                     min(samples) * scale, max(samples) * scale, samples[0] * scale,
                     f"recorded trace {file} x{scale} (peak {max(samples) * scale:.0f} req/s)")
    raise ValueError(f"unknown shape {shape!r}")


# ------------------------------------------------------------------------------ targets
def _pod_latency_ms(service: dict[str, Any], cpu: float, speed: float, base_ms: float,
                    utilisation: float, q: float) -> float:
    """The simulator's ``q`` quantile of one pod of ``cpu`` cores at ``utilisation``."""
    mu = queueing.service_rate(service["rate_per_core"], cpu, service["cpu_exponent"], 1.0,
                               "cpu") * speed
    lam = utilisation * mu
    terms = queueing.pod_components(lam, mu, max(1, int(cpu)), lam, base_ms, 5000.0, False)
    arr = np.asarray(terms, dtype=float)
    comps = queueing.Components(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy())
    out = queueing.quantile(comps, q)
    return base_ms if out is None else out


def _round_up(x: float) -> float:
    """Up to a number a service owner would write (2 significant digits)."""
    if x <= 0:
        return x
    step = 10 ** (math.floor(math.log10(x)) - 1)
    return float(round(math.ceil(x / step - 1e-9) * step, 6))


# ------------------------------------------------------------------------------ the scenario
def _tight_nodes(target: float, low: float, high: float, node_cpu: float,
                 largest_pod: float) -> tuple[float, int]:
    """Node size and count of a pool of at least ``low`` cores and below ``high``, as near
    ``target`` (within them) as whole nodes allow: nodes of the drawn size ``node_cpu``, else
    of the first halving of it (down to 2 cores and the largest pod) whose nodes land in the
    range; when none does, nodes of the largest pod's size, as many as stay below ``high``."""
    size = node_cpu
    while size >= max(2.0, largest_pod):
        nodes = max(math.floor(target / size), math.ceil(low / size), 1)
        if low <= nodes * size < high:
            return size, nodes
        size /= 2
    size = float(max(2, math.ceil(largest_pod)))
    return size, max(1, math.ceil(high / size) - 1)


def generate(seed: int, contention: str | None = None) -> dict[str, Any]:
    """A scenario document drawn from ``seed`` (see the module's docstring); ``contention``
    ``"tight"`` draws workloads competing for one pool too small for their summed peak."""
    if contention is not None and contention not in CONTENTION:
        raise ValueError(f"contention {contention!r}: use one of {', '.join(CONTENTION)} "
                         "(or none, the default draw)")
    tight_contention = contention == "tight"
    rng = np.random.default_rng(seed)
    duration = float(rng.choice([3600, 5400, 7200, 9000, 10800]))
    # Drawn whatever the option says, so that everything after it is drawn as for the seed.
    shared = _chance(rng, 0.25) or tight_contention
    n_workloads = int(rng.integers(2, 4)) if shared else 1
    notes: list[str] = []

    # ---- the cluster's shape: regions, node generations, a GPU pool
    pools: list[_Pool] = []
    base_price = _log_uniform(rng, 0.02, 0.06)
    if shared:
        node_cpu = float(rng.choice([8, 16, 32]))
        pools.append(_Pool("shared", str(rng.choice(REGIONS)), 1.0, node_cpu,
                           _r(base_price, 3), _r(rng.uniform(0, 3))))
        has_gpu = False
        notes.append(f"{n_workloads} workloads competing for one small pool")
    else:
        n_regions = int(rng.choice([1, 2, 3], p=[0.55, 0.3, 0.15]))
        regions = [str(r) for r in rng.choice(REGIONS, size=n_regions, replace=False)]
        region_price = {r: (1.0 if i == 0 else rng.uniform(0.7, 1.3))
                        for i, r in enumerate(regions)}
        region_net = {r: (rng.uniform(0, 3) if i == 0 else rng.uniform(10, 60))
                      for i, r in enumerate(regions)}
        n_gens = int(rng.choice([1, 2, 3], p=[0.5, 0.4, 0.1]))
        # Each newer generation is 15-60 % faster than the one before.
        speeds = [1.0]
        for _ in range(n_gens - 1):
            speeds.append(_r(speeds[-1] * rng.uniform(1.15, 1.6)))
        alpha = rng.uniform(0.5, 1.2)
        for k in range(max(n_gens, n_regions)):
            speed, region = speeds[k % n_gens], regions[k % n_regions]
            name = f"{region}-gen{k % n_gens + 1}" if n_gens > 1 else f"{region}-general"
            pools.append(_Pool(name, region, speed, float(rng.choice([8, 16, 32, 64])),
                               _r(base_price * region_price[region] * speed ** alpha, 3),
                               _r(region_net[region])))
        has_gpu = _chance(rng, 0.35)
        if has_gpu:
            region = regions[int(rng.integers(0, n_regions))]
            pools.append(_Pool(f"{region}-gpu", region, 1.0, float(rng.choice([16, 32, 64])),
                               _r(base_price * region_price[region], 3),
                               _r(region_net[region]), int(rng.choice([1, 2, 4, 8])),
                               _r(rng.uniform(0.8, 3.5))))
        if n_regions > 1:
            notes.append(f"regions {', '.join(regions)}")
        if n_gens > 1:
            notes.append(f"node generations at speed {', '.join(f'{s:g}x' for s in speeds)}")
        if has_gpu:
            notes.append(f"GPU pool ({pools[-1].gpus} GPU/node at ${pools[-1].cost_per_gpu_hour}"
                         "/GPU-h)")
    cpu_pools = [p for p in pools if not p.gpus]
    multi_pool = len(pools) > 1
    speeds_differ = len({p.speed for p in pools}) > 1

    # ---- the admin's knobs (only those this cluster makes meaningful)
    actuators = ["remove-pod" if _chance(rng, 0.15) else "replicas"]
    if _chance(rng, 0.5):
        actuators.append("cpu")
    if has_gpu and _chance(rng, 0.8):
        actuators.append("device")
    if multi_pool and _chance(rng, 0.6):
        actuators.append("placement")
    if speeds_differ and _chance(rng, 0.5):
        actuators.append("weights")
    sizes: tuple[float, ...] | None = None
    if "cpu" in actuators:
        sizes = tuple(s for s in CPU_SIZES if s == 1.0 or _chance(rng, 0.6))

    # ---- workloads: service, load, objectives
    names = [str(n) for n in rng.choice(NAMES, size=n_workloads, replace=False)]
    spaces = ([str(s) for s in rng.choice(NAMESPACES, size=n_workloads, replace=False)]
              if shared and _chance(rng, 0.5)
              else [str(rng.choice(NAMESPACES))] * n_workloads)
    workloads: list[_Workload] = []
    manifests: list[dict[str, Any]] = []
    profiles: dict[tuple[str, str], dict[str, Any]] = {}
    tight = shared or _chance(rng, 0.25)
    priorities: list[float] = []
    for name, ns in zip(names, spaces, strict=True):
        rate_per_core = _r(_log_uniform(rng, 5.0, 300.0))
        service = draw_service(rng, rate_per_core)
        cpu = float(rng.choice([0.5, 1.0, 2.0], p=[0.25, 0.5, 0.25]))
        if sizes is not None and cpu not in sizes:
            cpu = 1.0
        pool = None
        if multi_pool and not shared and _chance(rng, 0.5):
            pool = cpu_pools[int(rng.integers(0, len(cpu_pools)))].name
        if has_gpu:
            gpu = pools[-1]
            pod_price = cpu * gpu.cost_per_core_hour
            breakeven = 1.0 + gpu.cost_per_gpu_hour / pod_price
            service["gpu_speedup"] = _r(max(1.5, breakeven * _log_uniform(rng, 0.3, 3.0)))
        peak_cores = _log_uniform(rng, 3.0, 40.0)
        shape = str(rng.choice(SHAPES))
        load = _load(rng, shape, peak_cores * rate_per_core, duration)
        workloads.append(_Workload(name, ns, service, load, cpu, pool))

        # Where the reference pod runs: its pinned pool; the best the placement actuator
        # reaches; unpinned without placement, the worst pool its pods may land on.
        reach = [p for p in pools if pool is None or p.name == pool]
        if pool is None and "placement" in actuators:
            ref_net = min(p.network_latency_ms for p in reach)
            ref_speed = max(p.speed for p in reach if p.network_latency_ms == ref_net)
        else:
            ref_net = max(p.network_latency_ms for p in reach)
            ref_speed = min(p.speed for p in reach)
        ref_cpu = cpu if sizes is None else 1.0
        base_ms = service["base_latency_ms"] + ref_net

        objectives: list[dict[str, Any]] = []
        percentiles = [int(rng.choice(PERCENTILES, p=[0.15, 0.25, 0.35, 0.25]))]
        if _chance(rng, 0.2):
            percentiles.append(int(rng.choice([p for p in PERCENTILES if p != percentiles[0]])))
        utilisation = 1.0
        for pct in sorted(percentiles):
            u = float(rng.uniform(0.3, 0.8))
            utilisation = min(utilisation, u)
            target = _round_up(_pod_latency_ms(service, ref_cpu, ref_speed, base_ms, u,
                                               pct / 100))
            objectives.append({"name": f"p{pct}latency", "value": target,
                               "measuredBy": f"p{pct}latency"})
            profiles[ns, f"p{pct}latency"] = {"type": "latency", "percentile": pct}
        if _chance(rng, 0.35):
            objectives.append({"name": "availability",
                               "value": float(rng.choice([0.99, 0.995, 0.999])),
                               "measuredBy": "availability"})
            profiles[ns, "availability"] = {"type": "availability"}
        if _chance(rng, 0.2):
            floor = _r(load.low * rng.uniform(0.5, 0.9), 3)
            objectives.append({"name": "throughput", "value": floor, "measuredBy": "throughput"})
            profiles[ns, "throughput"] = {"type": "throughput"}
        if _chance(rng, 0.3):
            for o in objectives:
                o["tolerance"] = 0.05
        priority = _r(rng.uniform(0.2, 1.0))
        while tight_contention and priority in priorities:     # who comes first is drawn
            priority = _r(rng.uniform(0.2, 1.0))
        priorities.append(priority)
        manifests.append({"apiVersion": API_VERSION, "kind": "Intent",
                          "metadata": {"name": name, "namespace": ns},
                          "spec": {"targetRef": {"kind": "Deployment", "name": name},
                                   "priority": priority,
                                   "objectives": objectives}})
        mu_ref = queueing.service_rate(rate_per_core, ref_cpu, service["cpu_exponent"], 1.0,
                                       "cpu") * ref_speed
        pods_at_peak = load.peak / (utilisation * mu_ref)
        need = pods_at_peak * ref_cpu
        targets = ", ".join(f"{o['name']} {o['value']:g}" for o in objectives)
        workloads[-1].notes.append(
            f"{ns}/{name}: {load.what}; {1000 / rate_per_core:.1f} ms CPU per request, "
            f"start-up {service['startup_s']} s; {targets}")
        # Capacity each pool must hold for this workload at its peak.
        homes = [p for p in reach if not p.gpus] or reach
        for p in homes:
            p.need_cores += need / len(homes)
        workloads[-1].pods_at_peak = pods_at_peak
        workloads[-1].need_cores = need
        workloads[-1].pods_at_start = load.initial / (utilisation * mu_ref)

    # ---- capacity: tight (1.1-1.5x the peak need) or ample (2.5-6x); with
    # contention="tight", below the summed peak need by up to the largest workload's
    factor = below = 0.0
    if tight_contention:
        below = rng.uniform(0.0, 1.0)       # one draw, in place of the factor's
    else:
        factor = rng.uniform(1.0, 1.4) if shared else (
            rng.uniform(1.1, 1.5) if tight else rng.uniform(2.5, 6.0))
    if tight and not shared:
        notes.append("tight capacity")
    pool_docs = []
    for p in pools:
        if p.gpus:
            nodes = int(rng.integers(1, 5))
        elif tight_contention:
            largest = max(w.need_cores for w in workloads)
            largest_pod = max(sizes) if sizes is not None else max(w.cpu for w in workloads)
            p.cpu, nodes = _tight_nodes(p.need_cores - largest * (1.0 - below),
                                        p.need_cores - largest, p.need_cores, p.cpu,
                                        largest_pod)
            notes.append(f"tight contention: {nodes * p.cpu:g} cores for a summed peak need "
                         f"of {p.need_cores:.1f} (the largest workload's {largest:.1f})")
        else:
            nodes = max(1, math.ceil(p.need_cores * factor / p.cpu))
        pool_docs.append(p.doc(nodes))

    # ---- bounds and the workloads' starting point
    peak_pods = max(w.pods_at_peak for w in workloads)
    smallest = min(sizes) if sizes is not None else min(w.cpu for w in workloads)
    max_replicas = max(4, math.ceil(peak_pods * rng.uniform(1.5, 4.0) / min(1.0, smallest)))
    min_replicas = int(rng.choice([1, 2]))
    replicas = {"min": min_replicas, "max": max_replicas,
                "maxStep": max(2, min(max_replicas // 2, int(rng.integers(2, 17)))),
                "cooldownSeconds": int(rng.choice([30, 60, 120, 180, 300]))}
    admin: dict[str, Any] = {"actuators": actuators, "replicas": replicas, "cycleSeconds": 15}
    if sizes is not None:
        admin["cpu"] = {"sizes": list(sizes)}

    workload_docs = []
    for w in workloads:
        start = w.pods_at_start * rng.uniform(0.5, 1.5)
        doc: dict[str, Any] = {
            "name": w.name, "namespace": w.namespace,
            "replicas": int(min(max_replicas, max(min_replicas, math.ceil(start)))),
            "cpu": w.cpu, "service": w.service, "trace": w.load.trace}
        if w.pool is not None:
            doc["pool"] = w.pool
        workload_docs.append(doc)

    profile_docs = []
    for (ns, prof), spec in sorted(profiles.items()):
        profile_docs.append({"apiVersion": API_VERSION, "kind": "KPIProfile",
                             "metadata": {"name": prof, "namespace": ns}, "spec": spec})
    description = "; ".join([
        f"generated from seed {seed}: {duration / 3600:g} h",
        *notes, f"actuators {', '.join(actuators)}",
        *(n for w in workloads for n in w.notes)])
    return {
        "name": f"gen-{seed}-tight" if tight_contention else f"gen-{seed}",
        "description": description,
        "seed": int(seed),
        "duration": duration,
        "step_s": 5,
        "cluster": {"pools": pool_docs},
        "workloads": workload_docs,
        "admin": admin,
        "manifests": [*profile_docs, *manifests],
    }


def relocate(doc: dict[str, Any], directory: Path | str | None) -> dict[str, Any]:
    """A copy of ``doc`` whose ``csv`` trace files resolve from ``directory`` (where the
    document will be written): relative when ``directory`` and the file share more than the
    root, else absolute. ``None``: absolute paths, which resolve from anywhere."""
    out = copy.deepcopy(doc)
    for w in out.get("workloads", []):
        trace = w.get("trace", {})
        if trace.get("kind") == "csv" and not Path(trace["file"]).is_absolute():
            path = (SCENARIO_DIR / trace["file"]).resolve()
            if directory is None:
                trace["file"] = str(path)
                continue
            where = Path(directory).resolve()
            try:
                near = os.path.commonpath([path, where]) != path.anchor
            except ValueError:      # another drive (Windows)
                near = False
            trace["file"] = os.path.relpath(path, where) if near else str(path)
    return out
