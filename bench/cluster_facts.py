"""Cluster facts once per snapshot (issue 13): the cluster reads of one intent's planning on a
large cluster, with the facts shared by every intent (as now) against recomputed for every call
(the per-call scan of all nodes each scoring call did before), in one process.

Per intent it does what a grid plan does with the cluster: the search space (GPU present, pool
names), the price of a grid of candidates, and the GPU/core fit, twice (the grid and the current
configuration). Prints CPU ms per intent both ways and the ratio.

    .venv/bin/python bench/cluster_facts.py [--nodes 5000] [--pools 20] [--intents 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.domain.cluster_facts import ClusterFacts
from planner.domain.state import ClusterSnapshot, NodeState
from planner.models.predictor import CandidateBatch
from planner.planners.search_space import SearchSpace, gpu_capacity_ok, prices


def cluster(nodes: int, pools: int) -> ClusterSnapshot:
    out = []
    for i in range(nodes):
        p = i % pools
        gpu = p < max(1, pools // 10)
        out.append(NodeState(f"n{i}", f"pool-{p}", f"region-{p % 3}", 16.0, 4.0,
                             4 if gpu else 0, 0, 0.03 + 0.001 * p, 2.5 if gpu else 0.0))
    return ClusterSnapshot(0.0, tuple(out), {})


def one_intent(snapshot: ClusterSnapshot, space: SearchSpace) -> float:
    """The cluster reads of one grid plan; returns a checksum so nothing is optimised away."""
    facts = snapshot.facts
    names = facts.pool_names if facts.has_gpu else ()
    batch = space.grid()
    total = float(prices(snapshot, batch).sum()) + float(gpu_capacity_ok(snapshot, batch).sum())
    current = CandidateBatch.of([batch.config(0)])
    total += float(prices(snapshot, current).sum())
    total += float(gpu_capacity_ok(snapshot, current).sum())
    return total + len(names)


class Fresh(ClusterSnapshot):
    """A snapshot whose facts are recomputed on every read: the per-call scans of before."""

    @property  # type: ignore[override]
    def facts(self) -> ClusterFacts:
        return ClusterFacts.of(self.nodes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pools", type=int, default=20)
    ap.add_argument("--intents", type=int, default=1000)
    args = ap.parse_args()
    shared = cluster(args.nodes, args.pools)
    space = SearchSpace(tuple(range(1, 41)), (0.5, 1.0, 2.0), ("cpu",), (None, "pool-1"))
    per_call = Fresh(shared.time, shared.nodes, shared.workloads)
    results = {}
    for name, snap in (("per call (before)", per_call), ("once per snapshot", shared)):
        t0 = time.process_time()
        check = sum(one_intent(snap, space) for _ in range(args.intents))
        results[name] = ((time.process_time() - t0) / args.intents * 1000.0, check)
    (before, c1), (after, c2) = results.values()
    assert abs(c1 - c2) < 1e-6 * max(1.0, abs(c1)), "the two ways priced differently"
    print(f"{args.nodes} nodes in {args.pools} pools, {args.intents} intents, "
          f"{space.size} candidates each")
    for name, (ms, _) in results.items():
        print(f"  {name:<20} {ms:8.3f} ms CPU per intent")
    print(f"  ratio {before / after:.1f}x")


if __name__ == "__main__":
    main()
