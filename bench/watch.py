"""Watch sharing: upstream requests and bytes with N in-process consumers of pods.

Against kmock's KubernetesEmulator (``bench/harness/apiserver.py``, real HTTP on 127.0.0.1)
holding ``--pods`` pods (about as large as real ones, ~3.4 KB of JSON each: managedFields, env,
probes, volumes), for N = 1, 4, 16 consumers, two designs in the same process:

* ``shared`` - one :class:`planner.k8s.watchcache.WatchCache`; every consumer takes a snapshot
  (``list``) and subscribes to the event stream;
* ``naive``  - every consumer has its own list+watch (its own cache instance).

After the consumers are in, ``--updates`` pod updates (label patches through the API, each a
watch event of a whole pod) are streamed, and the run ends when every consumer has seen all of
them. Counted on the client side (the cache's counters) and checked against the requests the
server saw: upstream list and watch requests, upstream bytes (response bodies), and what the
consumers were served. A second table gives the cache's memory per pod with the default
projection and without one (whole objects), measured with ``tracemalloc``.

Usage: ``python bench/watch.py [--pods 2000] [--updates 500] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from kubernetes.client import ApiClient, Configuration  # noqa: E402

from bench.harness import apiserver as sa  # noqa: E402
from planner.k8s.resources import PODS  # noqa: E402
from planner.k8s.transport import ApiClientTransport  # noqa: E402
from planner.k8s.watchcache import CacheSettings, WatchCache  # noqa: E402

CONSUMERS = (1, 4, 16)
SETTINGS = CacheSettings(page_size=500, watch_timeout_s=300, queue_size=100_000)


def client(url: str) -> ApiClient:
    cfg = Configuration(host=url)
    cfg.connection_pool_maxsize = 64
    return ApiClient(cfg)


def realistic_pod(i: int) -> dict[str, Any]:
    """A pod about as large as a real one (~3.4 KB of JSON): managedFields, env, probes, ..."""
    p = sa.pod("bench", f"app{i % 50}", f"node-{i % 100}", name=f"pod-{i:05d}")
    c = p["spec"]["containers"][0]
    c["env"] = [{"name": f"SETTING_{k}", "value": f"value-{k}-{i % 7}"} for k in range(8)]
    c["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/app"},
        {"name": "kube-api-access", "readOnly": True,
         "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ]
    probe = {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
             "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3}
    c.update(livenessProbe=probe, readinessProbe=probe, imagePullPolicy="IfNotPresent",
             terminationMessagePath="/dev/termination-log")
    p["spec"].update(
        volumes=[
            {"name": "config", "configMap": {"name": f"app{i % 50}-config"}},
            {"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
        ],
        tolerations=[
            {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300} for t in ("not-ready", "unreachable")
        ],
        restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler",
        serviceAccountName="default", terminationGracePeriodSeconds=30)
    p["status"].update(hostIP=f"10.0.{i % 100}.1", podIP=f"10.1.{i // 250}.{i % 250}",
                       qosClass="Burstable")
    p["metadata"]["managedFields"] = [
        {"manager": m, "operation": "Update", "apiVersion": "v1",
         "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                      "f:spec": {"f:containers": {'k:{"name":"app"}': {
                          ".": {}, "f:image": {}, "f:env": {}, "f:resources": {}}}}}}
        for m in ("kube-controller-manager", "kubelet")
    ]
    return p


def seed(api: sa.RunningApiserver, pods: int) -> list[str]:
    objs = [realistic_pod(i) for i in range(pods)]
    api.call(api.server.put_objects, "v1/pods", objs)
    return [o["metadata"]["name"] for o in objs]


def run_case(
    api: sa.RunningApiserver, names: list[str], consumers: int, design: str, updates: int, seq: int
) -> dict[str, Any]:
    api_client = client(api.url)
    transport = ApiClientTransport(api_client)
    calls_before = len(api.server.calls)
    t0 = time.perf_counter()
    caches = [
        WatchCache(transport, settings=SETTINGS)
        for _ in range(1 if design == "shared" else consumers)
    ]
    subs = []
    snapshot_objects = 0
    for i in range(consumers):
        cache = caches[0 if design == "shared" else i]
        snapshot_objects += len(cache.list(PODS, wait=60))
        subs.append(cache.subscribe(PODS, replay=False))
    ready_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    http = httpx.Client(base_url=api.url, timeout=30)
    for u in range(updates):
        name = names[(u * 7919) % len(names)]
        r = http.patch(
            f"/api/v1/namespaces/bench/pods/{name}",
            content=json.dumps({"metadata": {"labels": {"rev": f"{seq}-{u}"}}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()
    http.close()
    seen = [0] * consumers
    deadline = time.monotonic() + 60
    while min(seen) < updates and time.monotonic() < deadline:
        for i, sub in enumerate(subs):
            seen[i] += sum(1 for e in sub.drain() if e.type == "MODIFIED")
        time.sleep(0.01)
    stream_s = time.perf_counter() - t1

    stats = [c.stats(PODS) for c in caches]
    server = [c for c in api.server.calls[calls_before:] if c.resource == "pods"]
    for c in caches:
        c.stop()
    api_client.close()
    return {
        "consumers": consumers,
        "design": design,
        "list_requests": sum(s.list_requests for s in stats),
        "watch_requests": sum(s.watch_requests for s in stats),
        "server_list_requests": sum(1 for c in server if c.verb == "list"),
        "server_watch_requests": sum(1 for c in server if c.verb == "watch"),
        "upstream_bytes": sum(s.upstream_bytes for s in stats),
        "upstream_objects": sum(s.upstream_objects for s in stats),
        "served_objects": sum(s.served_objects for s in stats),
        "served_bytes": sum(s.served_bytes for s in stats),
        "snapshot_objects": snapshot_objects,
        "events_per_consumer": min(seen),
        "ready_s": round(ready_s, 3),
        "stream_s": round(stream_s, 3),
    }


def measure_memory(api: sa.RunningApiserver, pods: int) -> list[dict[str, Any]]:
    out = []
    for label, projections in (("projected", None), ("whole objects", {"pods": None})):
        api_client = client(api.url)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        cache = WatchCache(
            ApiClientTransport(api_client), settings=SETTINGS, projections=projections
        )
        cache.list(PODS, wait=60)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        cache.stop()
        api_client.close()
        out.append(
            {
                "store": label,
                "pods": pods,
                "bytes_per_pod": round(used / pods),
                "mib_at_200k_pods": round(used / pods * 200_000 / 2**20),
            }
        )
    return out


def table(cases: list[dict[str, Any]]) -> str:
    head = (
        f"{'consumers':>9} {'design':>7} {'list req':>9} {'watch req':>9} "
        f"{'upstream MB':>11} {'served MB':>9} {'events/cons':>11} {'ready s':>7} "
        f"{'stream s':>8}"
    )
    lines = [head, "-" * len(head)]
    for c in cases:
        lines.append(
            f"{c['consumers']:>9} {c['design']:>7} {c['list_requests']:>9} "
            f"{c['watch_requests']:>9} {c['upstream_bytes'] / 1e6:>11.2f} "
            f"{c['served_bytes'] / 1e6:>9.2f} {c['events_per_consumer']:>11} "
            f"{c['ready_s']:>7.2f} {c['stream_s']:>8.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--updates", type=int, default=500)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    threading.excepthook = lambda a: None
    with sa.running_apiserver(history_limit=1) as api:
        names = seed(api, args.pods)
        cases = []
        seq = 0
        for n in CONSUMERS:
            for design in ("shared", "naive"):
                seq += 1
                cases.append(run_case(api, names, n, design, args.updates, seq))
        memory = measure_memory(api, args.pods)
    ratios = []
    for n in CONSUMERS:
        shared = next(c for c in cases if c["consumers"] == n and c["design"] == "shared")
        naive = next(c for c in cases if c["consumers"] == n and c["design"] == "naive")
        ratios.append(
            {
                "consumers": n,
                "upstream_requests_naive_over_shared": round(
                    (naive["list_requests"] + naive["watch_requests"])
                    / (shared["list_requests"] + shared["watch_requests"]),
                    2,
                ),
                "upstream_bytes_naive_over_shared": round(
                    naive["upstream_bytes"] / shared["upstream_bytes"], 2
                ),
                "upstream_bytes_saved": round(
                    1 - shared["upstream_bytes"] / naive["upstream_bytes"], 3
                ),
            }
        )
    result = {
        "pods": args.pods,
        "updates": args.updates,
        "page_size": SETTINGS.page_size,
        "cases": cases,
        "ratios": ratios,
        "memory": memory,
    }
    if args.json:
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        return 0
    print(
        f"watch sharing: {args.pods} pods, {args.updates} updates, list pages of "
        f"{SETTINGS.page_size} (kmock emulator over HTTP)\n"
    )
    print(table(cases))
    print()
    for r in ratios:
        print(
            f"{r['consumers']:>2} consumers: naive/shared upstream requests "
            f"{r['upstream_requests_naive_over_shared']:.1f}x, bytes "
            f"{r['upstream_bytes_naive_over_shared']:.1f}x "
            f"({r['upstream_bytes_saved']:.0%} saved)"
        )
    print()
    for m in memory:
        print(
            f"cache memory, {m['store']:>13}: {m['bytes_per_pod']:>6} B/pod "
            f"(~{m['mib_at_200k_pods']} MiB at 200,000 pods)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
