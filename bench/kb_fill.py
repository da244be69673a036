"""Does the embedded knowledge base slow down as it fills? (issues 12 and 13)

Records events of ``--intents`` intents, round robin, into each store (``memory``: the indexed
embedded store, :mod:`knowledge.embedded`; ``mongomock``: the pymongo store over mongomock, the
embedded default before it; a directory: mongomock plus its journal and snapshots) and prints,
after 1,000, 4,000 and 12,000 events are stored, the CPU cost per ``record_event`` in a window
of inserts and per read of one intent's newest 10 events (the same answer at every fill), and
the ratio of the last to the first (same process). ``--with-ttl`` adds the TTL index mongomock used
to be given, to show what it cost.

    .venv/bin/python bench/kb_fill.py [--sizes 1000,4000,12000] [--window 500] [--intents 100]
                                      [--with-ttl]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mongomock

from knowledge import base, connect, mongo

INTENTS = 100


def event(who: str, t: float) -> dict[str, Any]:
    """An event of ``who`` of the shipped scenarios' size (a few pods, one plan)."""
    return {"time": t, "intent": who, "workload": who,
            "current": {"p95latency": 41.0, "availability": 0.999},
            "desired": {"p95latency": 60.0, "availability": 0.995},
            "config": {"replicas": 6, "cpu": 1.0, "device": "cpu", "pool": None},
            "load": {"request_rate": 300.0},
            "pods": [{"name": f"checkout-{i}", "node": f"n-{i}", "cpu": 1.0, "ready": True}
                     for i in range(6)],
            "plan": {"reason": "current configuration still meets every objective"},
            "exploratory": False, "planner": "grid"}


READS = 20


def fill(kb: base.KnowledgeBase, sizes: list[int], window: int
         ) -> list[tuple[float, float]]:
    """ms of CPU per insert in a window after each size is reached, and per read of one
    intent's newest 10 events."""
    stored, out = 0, []
    for size in sizes:
        while stored < size:
            kb.record_event(event(f"shop/w{stored % INTENTS}", float(stored)))
            stored += 1
        t0 = time.process_time()
        for _ in range(window):
            kb.record_event(event(f"shop/w{stored % INTENTS}", float(stored)))
            stored += 1
        insert = (time.process_time() - t0) / window * 1000.0
        t0 = time.process_time()
        for i in range(READS):
            kb.events(f"shop/w{i % INTENTS}", since=0.0, limit=10)
        out.append((insert, (time.process_time() - t0) / READS * 1000.0))
    return out


def main() -> None:
    global INTENTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,4000,12000")
    ap.add_argument("--window", type=int, default=500)
    ap.add_argument("--intents", type=int, default=INTENTS)
    ap.add_argument("--with-ttl", action="store_true")
    args = ap.parse_args()
    INTENTS = args.intents
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="kb-fill-"))
    stores: list[tuple[str, base.KnowledgeBase]] = [
        ("memory", connect.open_knowledge_base("memory")),
        ("mongomock", connect.open_knowledge_base("mongomock://")),
        ("directory", connect.open_knowledge_base(str(tmp / "kb")))]
    if args.with_ttl:
        stores.append(("mongomock + TTL index",
                       mongo.MongoKnowledgeBase(mongomock.MongoClient(), ttl_index=True)))
    print(f"{'store':<24}{'':<8}" + "".join(f"{f'after {s}':>14}" for s in sizes)
          + f"{'ratio':>8}")
    try:
        for name, kb in stores:
            ms = fill(kb, sizes, args.window)
            kb.close()
            for i, what in enumerate(("insert", "read")):
                row = [m[i] for m in ms]
                print(f"{name if i == 0 else '':<24}{what:<8}"
                      + "".join(f"{m:>11.3f} ms" for m in row) + f"{row[-1] / row[0]:>7.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
