"""``KubernetesBackend.observe()`` at scale (issue 13): watch-cache memory, first and steady cycles.

Builds ``--nodes`` nodes, ``--deployments`` Deployments (all in one namespace unless
``--namespaces``: the worst case for matching selectors) and ``--pods`` pods spread over them
(pods as ``bench.harness.apiserver.pod`` makes them: labels, owner, annotations, env, ports,
conditions, container statuses). Two ways to feed the watch cache:

* ``feed`` (default, the full size): the cache's upstream is in memory
  (:class:`bench.harness.feed.FeedTransport`): a paged list, then watch events; no HTTP;
* ``--http``: kmock's emulator over real HTTP (:mod:`bench.harness.apiserver`), the same code
  path as in a cluster; pods change through ``PATCH .../pods/NAME/status`` (slower: use fewer
  pods).

Printed: the cache's memory after the initial list (RSS growth, default projections) and
what the backend keeps on top of it after the first ``observe()``, the process's RSS
(``--tracemalloc`` also traces the cache's allocations: exact, but the list is slower); then the
CPU time of the calling thread (``time.thread_time``: the machine may be shared) for the first
``observe()``, a cycle without changes, and cycles where ``--fractions`` of the pods changed
(half of them flip readiness and count a restart, a tenth are replaced by a new pod on another
node, the rest move node), each next to the full conversion (``observe_full()``, what
``observe()`` did before it was incremental) measured in the same process on the same cache, and
their ratio. The two snapshots are compared for equality on every measured cycle.

    python bench/observe.py [--pods 200000 --nodes 5000 --deployments 1000] [--json]
    python bench/observe.py --http --pods 10000 --nodes 250 --deployments 50
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from kubernetes.client import ApiClient, Configuration  # noqa: E402

from bench.harness import apiserver as sa  # noqa: E402
from bench.harness.feed import FeedTransport  # noqa: E402
from planner.domain.state import ClusterSnapshot  # noqa: E402
from planner.k8s.backend import KubernetesBackend  # noqa: E402
from planner.k8s.resources import DEPLOYMENTS, NODES, PODS, STATEFULSETS  # noqa: E402
from planner.k8s.transport import ApiClientTransport, Transport  # noqa: E402
from planner.k8s.watchcache import CacheSettings, WatchCache  # noqa: E402

OBSERVED = (NODES, PODS, DEPLOYMENTS, STATEFULSETS)
SETTINGS = CacheSettings(page_size=500, watch_timeout_s=3600, queue_size=100_000)
MIB = 2**20


class Shape:
    """Which node, Deployment and namespace each pod belongs to (deterministic)."""

    def __init__(self, pods: int, nodes: int, deployments: int, namespaces: int) -> None:
        self.pods, self.nodes, self.deployments = pods, nodes, deployments
        self.namespaces = namespaces
        self.generation = [0] * pods
        self.node_of = [(i * 7919) % nodes for i in range(pods)]

    def ns(self, d: int) -> str:
        return f"ns{d % self.namespaces}"

    def node(self, i: int) -> dict[str, Any]:
        return sa.node(f"node-{i:05d}", f"pool-{i % 10}", region=f"region-{i % 2}", cpu="32")

    def deployment(self, d: int) -> dict[str, Any]:
        return sa.deployment(self.ns(d), f"app{d:04d}", self.pods // self.deployments,
                             cpu="500m")

    def pod_name(self, i: int) -> str:
        return f"app{i % self.deployments:04d}-{i:06d}-{self.generation[i]}"

    def pod(self, i: int, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
        d = i % self.deployments
        return sa.pod(self.ns(d), f"app{d:04d}", f"node-{self.node_of[i]:05d}",
                      name=self.pod_name(i), ready=ready, restarts=restarts)

    def changes(self, count: int, rng: random.Random
                ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``count`` pod changes: ``(event type, pod)``; a replaced pod is a delete and an add."""
        for n, i in enumerate(rng.sample(range(self.pods), count)):
            if n % 10 == 0:
                yield "DELETED", self.pod(i)
                self.generation[i] += 1
                self.node_of[i] = rng.randrange(self.nodes)
                yield "ADDED", self.pod(i)
            elif n % 2:
                yield "MODIFIED", self.pod(i, ready=False, restarts=1 + self.generation[i])
            else:
                self.node_of[i] = rng.randrange(self.nodes)
                yield "MODIFIED", self.pod(i)


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / MIB


def cpu(fn: Callable[[], ClusterSnapshot]) -> tuple[float, ClusterSnapshot]:
    t = time.thread_time()
    out = fn()
    return time.thread_time() - t, out


def check_same(a: ClusterSnapshot, b: ClusterSnapshot) -> None:
    if a != b or list(a.workloads) != list(b.workloads):
        raise AssertionError("incremental observe() differs from observe_full()")


def cycles(backend: KubernetesBackend, shape: Shape, fractions: list[float], repeat: int,
           apply: Callable[[list[tuple[str, dict[str, Any]]]], None]) -> list[dict[str, Any]]:
    rng = random.Random(13)
    rows = []
    for frac in [0.0, *fractions]:
        inc_t: list[float] = []
        full_t: list[float] = []
        converted: list[int] = []
        for _ in range(repeat):
            changes = list(shape.changes(round(shape.pods * frac), rng))
            apply(changes)
            gc.collect()
            t_inc, snap = cpu(backend.observe)
            converted.append(backend.builder.counts.pods_converted)
            t_full, full = cpu(backend.observe_full)
            check_same(snap, full)
            inc_t.append(t_inc)
            full_t.append(t_full)
        inc, full_s = statistics.median(inc_t), statistics.median(full_t)
        rows.append({"changed_fraction": frac, "changed_pods": round(shape.pods * frac),
                     "pods_converted": converted[-1], "observe_cpu_s": round(inc, 4),
                     "observe_full_cpu_s": round(full_s, 3),
                     "speedup": round(full_s / inc, 1) if inc > 0 else None})
    return rows


def backend_over(transport: Transport, client: ApiClient) -> tuple[WatchCache, KubernetesBackend]:
    cache = WatchCache(transport, settings=SETTINGS)
    return cache, KubernetesBackend(cache, client, clock=lambda: 0.0, ready_wait_s=600)


def run_feed(shape: Shape, fractions: list[float], repeat: int,
             traced: bool) -> dict[str, Any]:
    feed = FeedTransport()
    feed.seed(NODES, lambda: (shape.node(i) for i in range(shape.nodes)))
    feed.seed(DEPLOYMENTS, lambda: (shape.deployment(d) for d in range(shape.deployments)))
    feed.seed(PODS, lambda: (shape.pod(i) for i in range(shape.pods)))
    client = ApiClient(Configuration(host="http://127.0.0.1:9"))
    gc.collect()
    rss0 = rss_mib()
    if traced:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t = time.process_time()
    cache, backend = backend_over(feed, client)
    cache.wait_ready(OBSERVED)
    load_cpu = time.process_time() - t
    gc.collect()
    cache_bytes = tracemalloc.get_traced_memory()[0] - base if traced else None
    tracemalloc.stop()  # timings without its overhead
    cache_rss = rss_mib() - rss0
    first, snap = cpu(backend.observe)
    gc.collect()
    tracemalloc.start()
    # What the backend keeps: measured by building it again under tracemalloc.
    from planner.k8s.changefeed import ChangeFeed
    from planner.k8s.snapshot_builder import SnapshotBuilder
    base = tracemalloc.get_traced_memory()[0]
    feed2, builder2 = ChangeFeed(cache, PODS), SnapshotBuilder(backend.labels)
    snap2 = builder2.update(0.0, feed2.poll(), cache.list(NODES), backend._raw_workloads())
    gc.collect()
    backend_bytes = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    check_same(snap, snap2)
    feed2.close()
    del feed2, builder2, snap2
    gc.collect()
    rss = rss_mib() - rss0

    def apply(changes: list[tuple[str, dict[str, Any]]]) -> None:
        for kind, obj in changes:
            feed.push(PODS, kind, obj)
        feed.wait_synced(cache, (PODS,), timeout=600)

    rows = cycles(backend, shape, fractions, repeat, apply)
    backend.close()
    cache.stop()
    return {"source": "feed (in memory, no HTTP)", "load_cpu_s": round(load_cpu, 1),
            "cache_rss_mib": round(cache_rss, 1),
            "cache_traced_mib": None if cache_bytes is None else round(cache_bytes / MIB, 1),
            "cache_traced_bytes_per_pod": (None if cache_bytes is None
                                           else round(cache_bytes / shape.pods)),
            "backend_mib": round(backend_bytes / MIB, 1),
            "rss_growth_mib": round(rss, 1), "first_observe_cpu_s": round(first, 3),
            "cycles": rows}


def run_http(shape: Shape, fractions: list[float], repeat: int) -> dict[str, Any]:
    with sa.running_apiserver(history_limit=1) as api:
        api.call(api.server.put_objects, "v1/nodes",
                 [shape.node(i) for i in range(shape.nodes)])
        api.call(api.server.put_objects, "apps/v1/deployments",
                 [shape.deployment(d) for d in range(shape.deployments)])
        api.call(api.server.put_objects, "v1/pods", [shape.pod(i) for i in range(shape.pods)])
        cfg = Configuration(host=api.url)
        cfg.connection_pool_maxsize = 16
        client = ApiClient(cfg)
        t = time.process_time()
        cache, backend = backend_over(ApiClientTransport(client), client)
        cache.wait_ready(OBSERVED)
        load_cpu = time.process_time() - t
        first, _ = cpu(backend.observe)
        http = httpx.Client(base_url=api.url, timeout=30)

        def apply(changes: list[tuple[str, dict[str, Any]]]) -> None:
            for kind, obj in changes:
                meta = obj["metadata"]
                path = f"/api/v1/namespaces/{meta['namespace']}/pods"
                if kind == "DELETED":
                    http.delete(f"{path}/{meta['name']}").raise_for_status()
                elif kind == "ADDED":
                    http.post(path, json=obj).raise_for_status()
                else:
                    for sub, body in (("", {"spec": {"nodeName": obj["spec"]["nodeName"]}}),
                                      ("/status", {"status": obj["status"]})):
                        http.patch(f"{path}/{meta['name']}{sub}", content=json.dumps(body),
                                   headers={"Content-Type": "application/merge-patch+json"}
                                   ).raise_for_status()
            want = str(api.server.resource_version)
            sa.wait_until(lambda: cache.stats(PODS).resource_version == want, timeout=120)

        rows = cycles(backend, shape, fractions, repeat, apply)
        http.close()
        backend.close()
        cache.stop()
        client.close()
    return {"source": "kmock emulator over HTTP", "load_cpu_s": round(load_cpu, 1),
            "first_observe_cpu_s": round(first, 3), "cycles": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=200_000)
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--deployments", type=int, default=1_000)
    ap.add_argument("--namespaces", type=int, default=1)
    ap.add_argument("--fractions", default="0.001,0.01", help="pods changed per cycle")
    ap.add_argument("--repeat", type=int, default=3, help="cycles measured per fraction")
    ap.add_argument("--http", action="store_true", help="through the emulator over HTTP")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="also trace the cache's allocations (exact bytes; the list is ~3x slower)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    threading.excepthook = lambda a: None
    shape = Shape(args.pods, args.nodes, args.deployments, args.namespaces)
    fractions = [float(f) for f in args.fractions.split(",") if f]
    run = (run_http(shape, fractions, args.repeat) if args.http
           else run_feed(shape, fractions, args.repeat, args.tracemalloc))
    result = {"pods": args.pods, "nodes": args.nodes, "deployments": args.deployments,
              "namespaces": args.namespaces, **run}
    if args.json:
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        return 0
    print(f"observe(): {args.pods} pods, {args.nodes} nodes, {args.deployments} Deployments in "
          f"{args.namespaces} namespace(s); {result['source']}")
    print(f"initial list into the cache: {result['load_cpu_s']} s CPU (whole process)")
    if "cache_rss_mib" in result:
        traced = (f", {result['cache_traced_mib']} MiB traced "
                  f"({result['cache_traced_bytes_per_pod']} B/pod)"
                  if result["cache_traced_mib"] is not None else "")
        print(f"watch cache: RSS +{result['cache_rss_mib']} MiB{traced}; backend on top: "
              f"{result['backend_mib']} MiB traced; RSS growth in all "
              f"{result['rss_growth_mib']} MiB")
    print(f"first observe(): {result['first_observe_cpu_s']} s CPU\n")
    head = (f"{'changed':>8} {'pods':>6} {'converted':>9} {'observe() s':>11} "
            f"{'full s':>7} {'full/observe':>12}")
    print(head)
    print("-" * len(head))
    for r in result["cycles"]:
        print(f"{r['changed_fraction']:>8.2%} {r['changed_pods']:>6} {r['pods_converted']:>9} "
              f"{r['observe_cpu_s']:>11.4f} {r['observe_full_cpu_s']:>7.3f} "
              f"{r['speedup'] or float('nan'):>11.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
