"""Where a controller's memory goes over many cycles (issue 13): the scale bench's loop
(:mod:`bench.scale`) with, at chosen measured cycles, the process's RSS, what ``tracemalloc``
traces, and the deep size of each component:

* ``kb_events``, ``kb_effects``, ``kb_other`` (statuses, memory documents, batch ids): the
  embedded knowledge base;
* ``model_cache``: the planners' effect-model caches (decoded models);
* ``planner``: the rest of the planners' state, the controller's per-intent memory, statuses,
  reservations and the pod-detail sampler;
* ``trainer``: the training hook's own state;
* ``simulator``: the simulated cluster (pods, utilisation samples, step records) and the run's
  accounting;
* ``untraced``: RSS minus what ``tracemalloc`` traces (the interpreter, extension modules,
  allocator retention), and what explains it: ``tracemalloc``'s own tables, pymalloc's arenas
  not holding objects (``pymalloc_free``), glibc's heap in use (``malloc_used``, Python's
  allocations over 512 bytes included) and free but kept (``malloc_free``), and the RSS after
  ``malloc_trim(0)`` hands that free memory back (``rss_trimmed``; with ``--trim``).

Components are measured in that order and an object is counted once, under the first that
reaches it (numpy views do not lead to their base; functions and bound methods are not
followed). ``other_traced`` is what ``tracemalloc`` traces that no component reaches: modules,
the interpreter's own objects, and the snapshots this script keeps of earlier marks (tens of
MiB at 100 intents: read it against ``--trace-from``, which starts tracing late). Without
tracing (``--no-trace``, the bench's own speed) the traced rows are ``-`` and pymalloc's arenas
are shown instead. Then the ``--top`` allocation sites that grew most between the first and the
last traced mark (by line; with ``--trace-from``, what was allocated since and still lives) and
the object types whose count grew most (tuples of numbers are not tracked by ``gc``).

    .venv/bin/python bench/memory.py --size 100x5000x200 --cycles 40 --at 5,20,40 --no-trace
    .venv/bin/python bench/memory.py --size 100x1000x20 --cycles 40 --at 10,30,40 --trace-from 30
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import os
import re
import sys
import tempfile
import tracemalloc
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scale import rss_mib, scenario
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

MIB = 2.0 ** 20
_OPAQUE = (ModuleType, type, FunctionType, BuiltinFunctionType, MethodType)


def deep_size(roots: Iterable[object], seen: set[int]) -> int:
    """Bytes of ``roots`` and everything they reach that ``seen`` does not hold yet (adding
    them); modules, classes and functions are not followed."""
    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def components(run: ScenarioRun) -> dict[str, list[object]]:
    """The roots of each component (see the module docstring), in counting order."""
    kb: Any = run.knowledge
    ctl: Any = run.controller
    planners = list(ctl._planners.values())
    caches = [c for p in planners for c in [getattr(getattr(p, "source", None), "cache", None)]
              if c is not None]
    return {
        "kb_events": [getattr(kb, "_events", None)],
        "kb_effects": [getattr(kb, "_effects", None)],
        "kb_other": [kb],
        "model_cache": caches,
        "planner": [*planners, ctl._memory, ctl._unrestored, ctl._statuses,
                    ctl._stored_statuses, ctl.reserved, ctl.placements, ctl.pod_detail],
        "trainer": [run.trainer],
        "simulator": [run.sim, run.accountant, run.plan_ms],
    }


def measure_now(run: ScenarioRun, trim: bool = False) -> dict[str, float]:
    """MiB per component, traced and RSS, now (after a full collection); ``trim``: then
    ``malloc_trim(0)`` and the RSS after it."""
    gc.collect()
    seen: set[int] = set()
    out = {k: deep_size(v, seen) / MIB for k, v in components(run).items()}
    rss = rss_mib()
    nan = float("nan")
    tracing = tracemalloc.is_tracing()
    traced = tracemalloc.get_traced_memory()[0] / MIB if tracing else nan
    out["other_traced"] = traced - sum(out.values())
    out["traced"] = traced
    out["untraced"] = rss - traced
    out["tracemalloc_own"] = tracemalloc.get_tracemalloc_memory() / MIB if tracing else nan
    # pymalloc does not report its arenas while tracemalloc hooks the allocator
    out.update(dict.fromkeys(("pymalloc_arenas", "pymalloc_free"), nan) if tracing
               else pymalloc_stats())
    out.update(malloc_stats())
    out["rss"] = rss
    if trim and (libc := _libc()) is not None:
        libc.malloc_trim(0)
        out["rss_trimmed"] = rss_mib()
    return out


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def malloc_stats() -> dict[str, float]:
    """glibc's heap (MiB): in use (mmapped chunks included) and free but kept; {} elsewhere."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return {}
    libc.mallinfo2.restype = _MallInfo2
    m = libc.mallinfo2()
    return {"malloc_used": (m.uordblks + m.hblkhd) / MIB, "malloc_free": m.fordblks / MIB}


def pymalloc_stats() -> dict[str, float]:
    """pymalloc (MiB): its arenas and the part of them no object holds."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode()

    def num(label: str) -> float:
        m = re.search(rf"{re.escape(label)}\s*=\s*([\d,]+)", text)
        return int(m.group(1).replace(",", "")) / MIB if m else 0.0

    arenas = num("bytes/arena")
    return {"pymalloc_arenas": arenas, "pymalloc_free": arenas - num("# bytes in allocated blocks")}


def type_counts() -> Counter[str]:
    return Counter(type(o).__name__ for o in gc.get_objects())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="100x5000x200", help="INTENTSxNODESxPODS")
    ap.add_argument("--warm", type=float, default=1.0, help="simulated minutes first")
    ap.add_argument("--cycles", type=int, default=40)
    ap.add_argument("--at", default="10,25,40", help="measured cycles to mark (1-based)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--trim", action="store_true",
                    help="malloc_trim(0) at each marked cycle (RSS after it: rss_trimmed)")
    ap.add_argument("--no-trace", action="store_true",
                    help="without tracemalloc (RSS as the bench sees it; no allocation sites)")
    ap.add_argument("--trace-from", type=int, default=0, metavar="N",
                    help="start tracemalloc at measured cycle N instead of before the run "
                         "(cheaper; sites then cover what was allocated since)")
    ap.add_argument("--frames", type=int, default=1, help="tracemalloc traceback depth")
    args = ap.parse_args()
    marks = sorted({int(x) for x in args.at.split(",")})
    intents, nodes, pods = (int(x) for x in args.size.split("x"))
    if not args.no_trace and not args.trace_from:
        tracemalloc.start(args.frames)
    run = ScenarioRun(parse_scenario(scenario(intents, nodes, pods), "memory"), "grid", 1)
    while run.elapsed < args.warm * 60.0:
        run.advance()
    per_cycle = round(run.cycle_s / run.step_s)
    rows: dict[int, dict[str, float]] = {}
    snaps: dict[int, tracemalloc.Snapshot] = {}
    counts: dict[int, Counter[str]] = {}
    for c in range(1, args.cycles + 1):
        for _ in range(per_cycle):
            run.advance()
        if c == args.trace_from and not args.no_trace:
            tracemalloc.start(args.frames)
            snaps[c] = tracemalloc.take_snapshot()
        if c in marks:
            rows[c] = measure_now(run, args.trim)
            rows[c]["events"] = run.knowledge.count_events()
            rows[c]["effects"] = len(run.knowledge.effects())
            counts[c] = type_counts()
            if tracemalloc.is_tracing():
                snaps[c] = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__)])
            print(f"cycle {c}: RSS {rows[c]['rss']:.0f} MiB, stored events "
                  f"{rows[c]['kb_events']:.1f} MiB", file=sys.stderr, flush=True)
    first, last = marks[0], marks[-1]
    span = max(1, last - first)
    print(f"{args.size}, warm {args.warm} min; MiB at measured cycles {marks}; growth per "
          f"cycle between {first} and {last}")
    print(f"{'component':<14}" + "".join(f"{'c' + str(m):>10}" for m in marks) + f"{'/cycle':>10}")
    for k in rows[first]:
        vals = [rows[m][k] for m in marks]
        fmt = "{:>10.0f}" if k in ("events", "effects") else "{:>10.2f}"
        cells = [f"{'-':>10}" if math.isnan(v) else fmt.format(v) for v in vals]
        g = (vals[-1] - vals[0]) / span
        print(f"{k:<14}" + "".join(cells) + (f"{'-':>10}" if math.isnan(g) else f"{g:>+10.3f}"))
    key = "traceback" if args.frames > 1 else "lineno"
    traced = sorted(snaps)
    grown = (snaps[traced[-1]].compare_to(snaps[traced[0]], key)[:args.top]
             if len(traced) > 1 else [])
    if grown:
        print(f"\ntop {args.top} allocation sites by growth, cycle {traced[0]} -> "
              f"{traced[-1]} (KiB):")
    for st in grown:
        where = st.traceback.format()
        print(f"  {st.size_diff / 1024:+10.0f} KiB {st.count_diff:+9d} blocks  "
              f"(now {st.size / MIB:.1f} MiB)  {where[0].strip()}")
        for line in where[1:]:
            print(f"  {'':>40}{line.strip()}")
    print(f"\nobject types by count growth, cycle {first} -> {last}:")
    diff = counts[last]
    diff.subtract(counts[first])
    for name, n in diff.most_common(args.top):
        print(f"  {name:<28} {counts[first][name]:>10} {n:+10d}")


if __name__ == "__main__":
    main()
