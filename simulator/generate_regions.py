"""Random multi-region scenarios from a seed: client geography nobody has looked at.

:func:`generate_regions` returns a scenario document (as :func:`simulator.generate.generate`
does; the reference is ``generated-regions:<seed>`` in ``bench/slo.py`` and
``bench/regions.py``), drawn with ``numpy.random.default_rng([seed, 14])`` only, so the same
seed always gives the same document and ``generate(seed)`` is untouched. The ranges were fixed
before any run of the exposure planner on these scenarios and are not to be changed after
(docs/regions.md, "On scenarios not looked at"). It draws:

* **pools**: 2-4 pool regions, 2-4 pools (one per pool region, the rest in a drawn region),
  each at its own price (a base price of 0.02-0.06 per core-hour, x0.7-1.4 per pool), speed 1,
  no extra network latency (the round trip is the network); the home pool is the first;
* **round trips**: within a region 1-10 ms, between two regions 30-200 ms (symmetric);
  sometimes (30 %) a client region without a pool of its own;
* **clients**: the home region's weight is 1; every other client region moves over the day,
  one of: *appear* (from nothing up to 0.05-1.5 in 2-4 steps, a hold, back to nothing),
  *shift* (demand moves from the home region to this one, and in half the draws back), a
  *diurnal* weight that touches zero once a period, or a *steady* small share (0.5-30 %,
  never gone); the first other region always moves (appear, shift or diurnal);
* **load balancer**: 0.01-0.2 per exposed pool per hour (the schema holds one price for
  every pool's load balancer);
* **workloads**: one or two, exposed in the home pool at the start, with the service and
  load shapes of :mod:`simulator.generate`; a latency objective (p90/p95/p99) whose target is
  the service's own quantile at a drawn utilisation of 30-80 % plus the largest same-region
  round trip plus a network allowance of 1-600 ms (log-uniform): some allowances leave room
  to serve far clients from home, some do not; sometimes (30 %) an availability objective;
* **guardrails**: sometimes (25 % per intent) data residency (``spec.regions``: the home
  region and fewer than all other pool regions), sometimes (25 %) an admin cap
  ``exposure.maxPools`` below the number of pools; ample capacity (every pool holds 1.5-3x
  the summed peak need).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulator import queueing
from simulator.generate import (
    API_VERSION,
    NAMES,
    NAMESPACES,
    REGIONS,
    SHAPES,
    _chance,
    _load,
    _log_uniform,
    _pod_latency_ms,
    _r,
    _round_up,
    draw_service,
)

STREAM = 14
"""Second word of the generator's seed (issue 14): ``default_rng([seed, STREAM])``."""
DURATIONS = (3600.0, 5400.0, 7200.0)
PATTERNS = ("appear", "shift", "diurnal", "steady")
PERCENTILES = (90, 95, 99)


def _ramp(top: float, start: float, spacing: float,
          n: int) -> list[tuple[float, float]]:
    """``n`` steps from ``start`` every ``spacing`` s, geometrically up to ``top``."""
    return [(start + k * spacing, top * 0.03 ** ((n - 1 - k) / max(1, n - 1)))
            for k in range(n)]


def _steps(points: list[tuple[float, float]]) -> list[dict[str, Any]]:
    return [{"at": float(round(t)), "rate": _r(r, 3)} for t, r in points]


def _pattern_trace(rng: np.random.Generator, pattern: str, duration: float
                   ) -> tuple[dict[str, Any] | None, float | None, dict[str, Any] | None, str]:
    """A client region's weight: (trace, constant share, the home region's trace when the
    demand shifts away from it, a note)."""
    if pattern == "appear":
        top = _log_uniform(rng, 0.05, 1.5)
        n = int(rng.integers(2, 5))
        spacing = rng.uniform(0.03, 0.08) * duration
        start = rng.uniform(0.05, 0.35) * duration
        hold = rng.uniform(0.1, 0.3) * duration
        up = _ramp(top, start, spacing, n)
        down_start = up[-1][0] + hold
        down = [(down_start + k * spacing, r) for k, (_, r) in
                enumerate(reversed(up[:-1]))]
        down.append((down_start + (n - 1) * spacing, 0.0))
        pts = [p for p in up + down if p[0] < duration - 60]
        return ({"kind": "step", "initial": 0.0, "steps": _steps(pts)}, None, None,
                f"appears up to {top:.2f} of the home region's weight and vanishes")
    if pattern == "shift":
        top = _log_uniform(rng, 1.0, 4.0)
        low = rng.uniform(0.0, 0.3)
        n = int(rng.integers(2, 5))
        spacing = rng.uniform(0.03, 0.08) * duration
        start = rng.uniform(0.05, 0.35) * duration
        up = _ramp(top, start, spacing, n)
        home = [(t, 1.0 - (1.0 - low) * (k + 1) / n) for k, (t, _) in enumerate(up)]
        back = _chance(rng, 0.5)
        if back:
            t_back = up[-1][0] + rng.uniform(0.1, 0.3) * duration
            up += [(t_back + k * spacing, r) for k, (_, r) in enumerate(reversed(up[:-1]))]
            up.append((t_back + (n - 1) * spacing, 0.0))
            home += [(t_back + k * spacing, low + (1.0 - low) * (k + 1) / n)
                     for k in range(n)]
        up = [p for p in up if p[0] < duration - 60]
        home = [p for p in home if p[0] < duration - 60]
        return ({"kind": "step", "initial": 0.0, "steps": _steps(up)}, None,
                {"kind": "step", "initial": 1.0, "steps": _steps(home)},
                f"demand shifts from the home region to it (up to {top:.1f} against "
                f"{low:.2f}){' and back' if back else ''}")
    if pattern == "diurnal":
        base = _log_uniform(rng, 0.05, 1.0)
        amplitude = base * rng.uniform(0.8, 1.0)
        phase = rng.uniform(-math.pi, math.pi)
        return ({"kind": "diurnal", "base": _r(base, 3), "amplitude": _r(amplitude, 3),
                 "period": duration, "phase": _r(phase, 3)}, None, None,
                f"diurnal weight {base - amplitude:.2f}-{base + amplitude:.2f}")
    share = _log_uniform(rng, 0.005, 0.3)
    return None, _r(share, 3), None, f"a steady share of {share:.1%}"


def generate_regions(seed: int) -> dict[str, Any]:
    """A multi-region scenario document drawn from ``seed`` (see the module's docstring)."""
    rng = np.random.default_rng([int(seed), STREAM])
    duration = float(rng.choice(DURATIONS))
    notes: list[str] = []

    # ---- regions, pools and round trips
    n_pool_regions = int(rng.integers(2, 5))
    n_pools = int(rng.integers(n_pool_regions, 5))
    lone_client = _chance(rng, 0.3)
    names = [str(r) for r in rng.choice(REGIONS, size=n_pool_regions + lone_client,
                                        replace=False)]
    pool_regions = names[:n_pool_regions]
    base_price = _log_uniform(rng, 0.02, 0.06)
    node_cpu = float(rng.choice([8, 16, 32]))
    pool_at = pool_regions + [pool_regions[int(rng.integers(0, n_pool_regions))]
                              for _ in range(n_pools - n_pool_regions)]
    pools: list[dict[str, Any]] = []
    for i, region in enumerate(pool_at):
        suffix = "a" if i < n_pool_regions else "b"
        pools.append({"name": f"{region}-{suffix}", "region": region, "nodes": 1,
                      "cpu": node_cpu,
                      "cost_per_core_hour": _r(base_price * rng.uniform(0.7, 1.4), 3)})
    home = pools[0]
    rtt: dict[str, dict[str, float]] = {a: {} for a in names}
    for i, a in enumerate(names):
        rtt[a][a] = _r(rng.uniform(1.0, 10.0))
        for b in names[i + 1:]:
            rtt[a][b] = rtt.setdefault(b, {})[a] = _r(rng.uniform(30.0, 200.0))
    latency = {c: {p: rtt[c][p] for p in pool_regions} for c in names}
    lb_cost = _r(_log_uniform(rng, 0.01, 0.2))
    notes.append(f"pools {', '.join(p['name'] for p in pools)} (home {home['name']}); "
                 f"load balancer {lb_cost}/h")

    # ---- client regions: the home one at weight 1, every other one moving or steady
    regions: list[dict[str, Any]] = []
    home_trace: dict[str, Any] | None = None
    for k, name in enumerate(names[1:]):
        pattern = str(rng.choice(PATTERNS[:3], p=[0.5, 0.25, 0.25]) if k == 0
                      else rng.choice(PATTERNS, p=[0.4, 0.2, 0.2, 0.2]))
        if pattern == "shift" and home_trace is not None:
            pattern = "appear"          # one shift away from home per scenario
        trace, share, shifted, note = _pattern_trace(rng, pattern, duration)
        if shifted is not None:
            home_trace = shifted
        regions.append({"name": name, "trace": trace} if trace is not None
                       else {"name": name, "share": share})
        notes.append(f"clients in {name} ({'no pool' if name not in pool_regions else 'a pool'}"
                     f", {rtt[names[0]][name]:g} ms from home): {note}")
    regions.insert(0, {"name": names[0], "trace": home_trace} if home_trace is not None
                   else {"name": names[0], "share": 1.0})

    # ---- workloads and intents
    n_workloads = int(rng.integers(1, 3))
    wl_names = [str(n) for n in rng.choice(NAMES, size=n_workloads, replace=False)]
    ns = str(rng.choice(NAMESPACES))
    near = max(rtt[r][r] for r in names)
    workloads: list[dict[str, Any]] = []
    manifests: list[dict[str, Any]] = []
    profiles: dict[str, dict[str, Any]] = {}
    need = 0.0
    peak_pods_all: list[float] = []
    starts: list[float] = []
    cpus: list[float] = []
    for name in wl_names:
        rate_per_core = _r(_log_uniform(rng, 5.0, 300.0))
        service = draw_service(rng, rate_per_core)
        cpu = float(rng.choice([0.5, 1.0, 2.0], p=[0.25, 0.5, 0.25]))
        peak_cores = _log_uniform(rng, 3.0, 30.0)
        shape = str(rng.choice(SHAPES))
        load = _load(rng, shape, peak_cores * rate_per_core, duration)
        pct = int(rng.choice(PERCENTILES, p=[0.3, 0.4, 0.3]))
        u = float(rng.uniform(0.3, 0.8))
        allowance = _log_uniform(rng, 1.0, 600.0)
        service_ms = _pod_latency_ms(service, cpu, 1.0, service["base_latency_ms"], u,
                                     pct / 100)
        target = _round_up(service_ms + near + allowance)
        objectives: list[dict[str, Any]] = [{"name": f"p{pct}latency", "value": target,
                                             "measuredBy": f"p{pct}latency"}]
        profiles[f"p{pct}latency"] = {"type": "latency", "percentile": pct}
        if _chance(rng, 0.3):
            objectives.append({"name": "availability",
                               "value": float(rng.choice([0.99, 0.995, 0.999])),
                               "measuredBy": "availability"})
            profiles["availability"] = {"type": "availability"}
        spec: dict[str, Any] = {"targetRef": {"kind": "Deployment", "name": name},
                                "priority": _r(rng.uniform(0.2, 1.0)),
                                "objectives": objectives}
        residency = ""
        if _chance(rng, 0.25):
            others = [str(r) for r in rng.choice(pool_regions[1:], size=int(
                rng.integers(0, n_pool_regions - 1)), replace=False)]
            spec["regions"] = [home["region"], *others]
            residency = f"; residency {spec['regions']}"
        manifests.append({"apiVersion": API_VERSION, "kind": "Intent",
                          "metadata": {"name": name, "namespace": ns}, "spec": spec})
        mu = queueing.service_rate(rate_per_core, cpu, service["cpu_exponent"], 1.0, "cpu")
        pods_at_peak = load.peak / (u * mu)
        need += pods_at_peak * cpu
        peak_pods_all.append(pods_at_peak)
        starts.append(load.initial / (u * mu))
        cpus.append(cpu)
        far_ok = [c for c in names if any(rtt[c][p] <= target / 2 for p in pool_regions
                                          if p != c)]
        notes.append(f"{ns}/{name}: {load.what}; p{pct} {target:g} ms (network allowance "
                     f"{allowance:.0f} ms; half the target covers a cross-region round trip "
                     f"for {len(far_ok)} of {len(names)} client regions){residency}")
        workloads.append({"name": name, "namespace": ns, "cpu": cpu, "service": service,
                          "trace": load.trace, "exposure": [home["name"]]})

    # ---- capacity, guardrails, starting replicas
    factor = rng.uniform(1.5, 3.0)
    for p in pools:
        p["nodes"] = max(1, math.ceil(need * factor / node_cpu))
    max_replicas = max(4, math.ceil(max(peak_pods_all) * rng.uniform(1.5, 4.0)
                                    / min(1.0, min(cpus))))
    min_replicas = int(rng.choice([1, 2]))
    admin: dict[str, Any] = {
        "actuators": ["replicas", "exposure"],
        "replicas": {"min": min_replicas, "max": max_replicas,
                     "maxStep": max(2, min(max_replicas // 2, int(rng.integers(2, 17)))),
                     "cooldownSeconds": int(rng.choice([30, 60, 120, 180, 300]))},
        "cycleSeconds": 15}
    if _chance(rng, 0.25):
        cap = int(rng.integers(1, n_pools))
        admin["exposure"] = {"maxPools": cap}
        notes.append(f"admin cap maxPools {cap}")
    for w, start in zip(workloads, starts, strict=True):
        w["replicas"] = int(min(max_replicas, max(min_replicas,
                                                  math.ceil(start * rng.uniform(0.5, 1.5)))))
    profile_docs = [{"apiVersion": API_VERSION, "kind": "KPIProfile",
                     "metadata": {"name": prof, "namespace": ns}, "spec": spec}
                    for prof, spec in sorted(profiles.items())]
    return {
        "name": f"gen-regions-{seed}",
        "description": "; ".join([f"generated-regions from seed {seed}: {duration / 3600:g} h",
                                  *notes]),
        "seed": int(seed),
        "duration": duration,
        "step_s": 5,
        "cluster": {"pools": pools},
        "clients": {"regions": regions, "latency_ms": latency, "lb_cost_per_hour": lb_cost},
        "workloads": [{k: w[k] for k in ("name", "namespace", "replicas", "cpu", "service",
                                         "trace", "exposure")} for w in workloads],
        "admin": admin,
        "manifests": [*profile_docs, *manifests],
    }
