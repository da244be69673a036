"""Squeeze benchmark: pods needed for the same p99, ``squeeze`` against ``balance``, on a real
HAProxy.

``pods`` identical backends (``workers`` workers each; every request is ``work_ms`` of work: a
long, steady service time) behind a real HAProxy (``/usr/sbin/haproxy``), an open-loop Poisson
client at a steady rate of ``load`` x the capacity of all the pods (latency from each request's
scheduled arrival, see ``bench/dispatch.py``), and the weight engine fed with live backend
metrics every ``update_s`` and writing weights through the runtime API. Policies:

* ``balance``: today's default (the ``slo`` policy, default parameters) on ``balance
  leastconn``, the configuration ``bench/dispatch.py`` measured as its best;
* ``squeeze``: the ``squeeze`` policy (utilisation threshold ``threshold``) on ``balance
  roundrobin``, where the weights are the shares (on leastconn an idle pod takes a request
  whenever it has fewer connections than its weight allows).

Each run is one continuous arrival sequence; the first ``warmup_s`` (the engine learning, the
weights settling) is not measured. Reported per run: p50, p99, each pod's share of the measured
requests, and the pods busy (more than ``busy_share`` of the requests). Then "pods needed for
the same p99": with ``P`` = squeeze's p99 with every pod,

* for ``balance`` the smallest ``k`` whose rerun with only ``k`` pods has a p99 within
  ``p99_tolerance`` of ``P`` (``<= (1 + p99_tolerance) x P``), searched from squeeze's count;
* for ``squeeze`` the pods it keeps busy, confirmed by a rerun with only those pods (the idle ones
  removed) whose p99 must also be within the tolerance of ``P``.

Every run uses the same arrival sequence (same seed) and a fresh backend process and HAProxy.

Usage: ``python bench/squeeze.py [--pods N] [--load F] [--measure-s S] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from actuators import dispatch as pw  # noqa: E402
from actuators.dataplanes import haproxy as haproxy_writer  # noqa: E402
from bench import dispatch as bd  # noqa: E402
from bench.harness import backends as sb  # noqa: E402
from bench.harness import haproxy as sh  # noqa: E402

POLICIES = ("balance", "squeeze")


@dataclasses.dataclass(frozen=True)
class SqueezeBenchConfig:
    pods: int = 6
    workers: int = 4
    work_ms: float = 100.0
    load: float = 0.45  # offered load as a fraction of the capacity of all ``pods``
    warmup_s: float = 10.0
    measure_s: float = 20.0
    seed: int = 1
    update_s: float = 0.5
    blackout_s: float = 2.0
    threshold: float = 0.8  # squeeze's utilisation threshold
    spread: str = "even"  # squeeze's spread
    busy_share: float = 0.05
    p99_tolerance: float = 0.10
    balance_lb: str = "leastconn"
    squeeze_lb: str = "roundrobin"
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.pods < 2 or self.workers < 1 or self.work_ms <= 0:
            raise ValueError("need pods >= 2, workers >= 1, work_ms > 0")
        if not 0 < self.load < 1 or self.warmup_s < 0 or self.measure_s <= 0:
            raise ValueError("need 0 < load < 1, warmup_s >= 0, measure_s > 0")

    @property
    def pod_capacity_rps(self) -> float:
        return self.workers / (self.work_ms / 1000.0)

    @property
    def rate_rps(self) -> float:
        return self.load * self.pods * self.pod_capacity_rps

    def lb(self, policy: str) -> str:
        return self.balance_lb if policy == "balance" else self.squeeze_lb

    def policy(self, name: str) -> pw.WeightPolicy:
        """Built from the classes (a policy's entry point is seen only once installed)."""
        if name == "balance":
            return pw.SloPolicy()  # what ``create_policy("balance")`` makes
        return pw.SqueezePolicy(utilisation_threshold=self.threshold, spread=self.spread)


@dataclasses.dataclass
class Run:
    policy: str
    pods: int
    lb: str
    requests: int
    errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    shares: dict[str, float]
    busy: list[str]
    weights: dict[str, int]
    weight_writes: int
    reasons: dict[str, str]

    @property
    def label(self) -> str:
        return f"{self.policy}-{self.pods}"


def schedule(cfg: SqueezeBenchConfig) -> list[float]:
    """Send offsets (s) of Poisson arrivals at ``cfg.rate_rps`` over warm-up and measurement."""
    rng = random.Random(cfg.seed)
    out: list[float] = []
    t, end = 0.0, cfg.warmup_s + cfg.measure_s
    while True:
        t += rng.expovariate(cfg.rate_rps)
        if t >= end:
            return out
        out.append(t)


async def drive(address: tuple[str, int], offsets: Sequence[float], work_ms: float,
                timeout_s: float) -> list[tuple[float, str | None]]:
    """Open-loop load; per request (latency from its scheduled arrival in s, the pod that
    answered), ``(nan, None)`` for an error."""
    host, port = address
    out: list[tuple[float, str | None]] = [(math.nan, None)] * len(offsets)
    start = time.monotonic()

    async def one(i: int, offset: float) -> None:
        try:
            status, body = await bd.http_get(host, port, f"/work?ms={work_ms:g}", timeout_s)
        except (OSError, TimeoutError, ConnectionError):
            return
        if status == 200:
            out[i] = (time.monotonic() - (start + offset), body.decode().strip())

    tasks = []
    for i, offset in enumerate(offsets):
        delay = start + offset - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, offset)))
    await asyncio.gather(*tasks)
    return out


def run(cfg: SqueezeBenchConfig, policy: str, pods: int, offsets: Sequence[float]) -> Run:
    """One run of ``policy`` on the first ``pods`` backends."""
    specs = [sb.BackendSpec(f"p{i}", workers=cfg.workers) for i in range(pods)]
    lb = cfg.lb(policy)
    with sb.BackendFleet(specs) as fleet:
        servers = [sh.ServerSpec(s.name, *fleet.address(s.name), weight=1) for s in specs]
        with sh.HAProxyProcess(servers, balance=lb) as proxy:
            engine = pw.WeightEngine(cfg.policy(policy),
                                     pw.EngineConfig(blackout_s=cfg.blackout_s))
            writer = haproxy_writer.HAProxyWriter(proxy.backend, proxy.api_address)
            updater = bd.WeightUpdater(fleet, engine, writer, cfg.update_s)
            updater.start()
            try:
                answers = asyncio.run(drive((proxy.host, proxy.frontend_port), offsets,
                                            cfg.work_ms, cfg.request_timeout_s))
            finally:
                updater.stop()
            weights = haproxy_writer.RuntimeAPI(proxy.api_address).server_weights(proxy.backend)
        fleet.wait_idle(timeout=30)
    measured = [a for a, t in zip(answers, offsets, strict=True) if t >= cfg.warmup_s]
    ok = [latency for latency, _ in measured if not math.isnan(latency)]
    counts = dict.fromkeys((s.name for s in specs), 0)
    for _, pod in measured:
        if pod in counts:
            counts[pod] += 1
    served = sum(counts.values())
    shares = {p: c / served if served else 0.0 for p, c in counts.items()}
    last = updater.last_update
    return Run(
        policy=policy, pods=pods, lb=lb, requests=len(measured), errors=len(measured) - len(ok),
        p50_ms=sb.percentile(ok, 0.50) * 1000, p95_ms=sb.percentile(ok, 0.95) * 1000,
        p99_ms=sb.percentile(ok, 0.99) * 1000, max_ms=max(ok) * 1000 if ok else math.nan,
        shares=shares, busy=[p for p, s in shares.items() if s > cfg.busy_share],
        weights=weights, weight_writes=updater.writes,
        reasons={k: d.reason for k, d in last.decisions.items()} if last else {})


def run_benchmark(cfg: SqueezeBenchConfig, log: Any = None) -> dict[str, Any]:
    """Every run the comparison needs; a JSON-able report."""
    if sh.find_binary() is None:
        raise RuntimeError(sh.SKIP_REASON)
    offsets = schedule(cfg)
    started = time.monotonic()
    runs: dict[str, Run] = {}

    def measure(policy: str, pods: int) -> Run:
        key = f"{policy}-{pods}"
        if key not in runs:
            runs[key] = run(cfg, policy, pods, offsets)
            if log is not None:
                r = runs[key]
                log(f"  {key:<11} p99 {r.p99_ms:8.1f} ms, busy {len(r.busy)}, "
                    f"{time.monotonic() - started:.0f} s")
        return runs[key]

    measure("balance", cfg.pods)
    squeeze = measure("squeeze", cfg.pods)
    target = (1 + cfg.p99_tolerance) * squeeze.p99_ms
    # balance: smallest k whose p99 is within the tolerance, searched from squeeze's count; a k
    # whose capacity does not exceed the rate is not run (its queue grows without bound)
    least = math.floor(cfg.rate_rps / cfg.pod_capacity_rps) + 1
    k = max(least, min(cfg.pods, len(squeeze.busy)))
    if measure("balance", k).p99_ms <= target:
        while k - 1 >= least and measure("balance", k - 1).p99_ms <= target:
            k -= 1
        needed: int | None = k
    else:
        needed = None
        for bigger in range(k + 1, cfg.pods + 1):
            if measure("balance", bigger).p99_ms <= target:
                needed = bigger
                break
    busy = len(squeeze.busy)
    confirm = measure("squeeze", busy) if 0 < busy < cfg.pods else squeeze
    return {
        "config": {**dataclasses.asdict(cfg), "pod_capacity_rps": cfg.pod_capacity_rps,
                   "rate_rps": cfg.rate_rps, "arrivals": len(offsets),
                   "haproxy": sh.find_binary()},
        "runs": {key: {**dataclasses.asdict(r), "label": r.label} for key, r in runs.items()},
        "pods_needed": {
            "p99_target_ms": target,
            "balance": needed,
            "balance_searched": sorted(r.pods for r in runs.values() if r.policy == "balance"),
            "squeeze": busy,
            "squeeze_confirmed": confirm.p99_ms <= target,
            "squeeze_confirm_p99_ms": confirm.p99_ms,
        },
        "elapsed_s": time.monotonic() - started,
    }


def format_report(report: dict[str, Any]) -> str:
    cfg, need = report["config"], report["pods_needed"]
    worth = cfg["rate_rps"] / cfg["pod_capacity_rps"]
    balance = need["balance"] if need["balance"] is not None else f"more than {cfg['pods']}"
    lines = [
        f"{cfg['pods']} identical pods of {cfg['workers']} workers, {cfg['work_ms']:g} ms per "
        f"request: {cfg['pod_capacity_rps']:.0f} req/s each; load {cfg['rate_rps']:.0f} req/s "
        f"Poisson = {cfg['load']:.0%} of all {cfg['pods']} ({worth:.1f} pods' worth); "
        f"{cfg['warmup_s']:g} s warm-up + {cfg['measure_s']:g} s measured; seed {cfg['seed']}",
        f"balance: policy slo on {cfg['balance_lb']}; squeeze: threshold {cfg['threshold']:g}, "
        f"spread {cfg['spread']} on {cfg['squeeze_lb']}; engine blackout {cfg['blackout_s']:g} "
        f"s, update every {cfg['update_s']:g} s via the HAProxy runtime API",
        "",
        f"{'run':<11} {'lb':<10} {'reqs':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'errors':>6} {'busy':>4} {'writes':>6}  share of requests per pod / final weights",
    ]
    for r in report["runs"].values():
        shares = " ".join(f"{p}={s:.0%}" for p, s in r["shares"].items())
        weights = " ".join(f"{w}" for w in r["weights"].values())
        lines.append(
            f"{r['label']:<11} {r['lb']:<10} {r['requests']:>5} {r['p50_ms']:8.1f} "
            f"{r['p99_ms']:8.1f} {r['max_ms']:8.1f} {r['errors']:>6} {len(r['busy']):>4} "
            f"{r['weight_writes']:>6}  "
            f"{shares} / {weights}")
    lines += [
        "",
        f"busy: pods serving more than {cfg['busy_share']:.0%} of the measured requests; "
        "writes: weight writes to HAProxy in the run",
        f"pods needed for p99 <= {need['p99_target_ms']:.1f} ms (squeeze's with all "
        f"{cfg['pods']} pods + {cfg['p99_tolerance']:.0%}):",
        f"  balance: {balance} (runs with {need['balance_searched']} pods)",
        f"  squeeze: {need['squeeze']} busy; rerun with only those: p99 "
        f"{need['squeeze_confirm_p99_ms']:.1f} ms, "
        f"{'holds' if need['squeeze_confirmed'] else 'does NOT hold'}",
    ]
    squeeze = report["runs"].get(f"squeeze-{cfg['pods']}")
    if squeeze and squeeze["reasons"]:
        lines += ["", "last weight reasons (squeeze, all pods):"]
        lines += [f"  {k}: {v}" for k, v in sorted(squeeze["reasons"].items())]
    lines.append(f"\nelapsed {report['elapsed_s']:.0f} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    d = SqueezeBenchConfig()
    parser.add_argument("--pods", type=int, default=d.pods)
    parser.add_argument("--workers", type=int, default=d.workers)
    parser.add_argument("--work-ms", type=float, default=d.work_ms)
    parser.add_argument("--load", type=float, default=d.load)
    parser.add_argument("--warmup-s", type=float, default=d.warmup_s)
    parser.add_argument("--measure-s", type=float, default=d.measure_s)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--threshold", type=float, default=d.threshold)
    parser.add_argument("--spread", choices=pw.squeeze.SPREADS, default=d.spread)
    parser.add_argument("--squeeze-lb", default=d.squeeze_lb)
    parser.add_argument("--balance-lb", default=d.balance_lb)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = SqueezeBenchConfig(
        pods=args.pods, workers=args.workers, work_ms=args.work_ms, load=args.load,
        warmup_s=args.warmup_s, measure_s=args.measure_s, seed=args.seed,
        threshold=args.threshold, spread=args.spread, squeeze_lb=args.squeeze_lb,
        balance_lb=args.balance_lb)
    report = run_benchmark(cfg, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
