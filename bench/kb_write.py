"""What one controller cycle's knowledge-base writes cost: one by one, or in one batch (issue 13).

Each cycle writes, for each of N intents, one event, one status and one planner memory. Three
ways, on each embedded store (``memory``: the indexed store; a directory: mongomock plus its
journal), measured in the same process (CPU time per cycle, median of the cycles):

``one by one``   ``record_event`` + ``put_status`` + ``put_memory`` per intent: what the
                 controller did before the write queue
``batched``      one ``record_events`` + ``put_statuses`` + ``put_memories`` per cycle: what
                 the write queue sends at the end of a cycle
``queued``       through ``ResilientKnowledgeBase``: the cycle's calls queue, then ``flush``
                 writes the batch (a simulation's cost; with the writer thread of live runs
                 the cycle itself only pays ``queue only``, printed too)

    .venv/bin/python bench/kb_write.py [--intents 10,100,1000] [--cycles 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kb_fill import event
from knowledge import base, connect, resilient


def status(t: float) -> dict[str, Any]:
    return {"conditions": [{"type": "ObjectivesMet", "status": "True", "lastTransitionTime": t,
                            "reason": "Met", "message": "every objective holds"}],
            "lastPlan": {"replicas": 6, "cpu": 1.0}}


def memory(t: float) -> dict[str, Any]:
    return {"planner": "grid", "planning": {"alarm": 0.5, "last": t},
            "actuators": {"replicas": {"last_change": t}}}


Cycle = Callable[[base.KnowledgeBase, list[str], float], None]


def one_by_one(kb: base.KnowledgeBase, intents: list[str], t: float) -> None:
    for key in intents:
        kb.record_event(event(key, t))
        kb.put_status(key, t, status(t))
        kb.put_memory(key, memory(t))


def batched(kb: base.KnowledgeBase, intents: list[str], t: float) -> None:
    kb.record_events([event(key, t) for key in intents])
    kb.put_statuses([(key, t, status(t)) for key in intents])
    kb.put_memories([(key, memory(t)) for key in intents])


@contextmanager
def store(kind: str) -> Iterator[base.KnowledgeBase]:
    tmp = Path(tempfile.mkdtemp(prefix="kb-write-"))
    kb = connect.open_knowledge_base("memory" if kind == "memory" else str(tmp / "kb"))
    try:
        yield kb
    finally:
        kb.close()
        shutil.rmtree(tmp, ignore_errors=True)


def measure(kind: str, n: int, cycles: int, way: str) -> tuple[float, float]:
    """Median CPU ms per cycle (and of its queueing part, for ``queued``)."""
    intents = [f"ns/intent-{i}" for i in range(n)]
    totals: list[float] = []
    queueing: list[float] = []
    with store(kind) as inner:
        kb: base.KnowledgeBase = inner
        if way == "queued":
            kb = resilient.ResilientKnowledgeBase(inner, buffer_size=max(10_000, 2 * n))
        for c in range(cycles):
            t = 1000.0 + 15.0 * c
            t0 = time.process_time()
            if way == "batched":
                batched(kb, intents, t)
            else:
                one_by_one(kb, intents, t)
            t1 = time.process_time()
            kb.flush()
            t2 = time.process_time()
            totals.append((t2 - t0) * 1000.0)
            queueing.append((t1 - t0) * 1000.0)
        assert inner.count_events() == n * cycles
    return statistics.median(totals), statistics.median(queueing)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--intents", default="10,100,1000")
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--stores", default="memory,directory")
    args = ap.parse_args()
    sizes = [int(s) for s in args.intents.split(",")]
    print(f"CPU ms per cycle (median of {args.cycles}); each intent: 1 event, 1 status, "
          "1 memory")
    print(f"{'store':<10}{'intents':>8}{'one by one':>12}{'batched':>10}{'ratio':>8}"
          f"{'queued':>10}{'ratio':>8}{'queue only':>12}")
    for kind in args.stores.split(","):
        for n in sizes:
            single, _ = measure(kind, n, args.cycles, "one by one")
            batch, _ = measure(kind, n, args.cycles, "batched")
            queued, queue_only = measure(kind, n, args.cycles, "queued")
            print(f"{kind:<10}{n:>8}{single:>12.2f}{batch:>10.2f}{single / batch:>7.2f}x"
                  f"{queued:>10.2f}{single / queued:>7.2f}x{queue_only:>12.2f}")


if __name__ == "__main__":
    main()
