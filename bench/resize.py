"""In-place CPU resize against rollout resize in the simulator (issue 15, item 4).

Runs one planner (the default, ``grid``) over the same scenarios, seeds and traces twice: with
the cluster resizing running pods in place (``cluster.in_place_resize: true``) and with every
resize rolled out (``false``), nothing else changed. Reports per run and per mode: restarts (pods
started in place of a running pod of another shape: a rollout's, an in-place resize's fallbacks
included), in-place resizes, deferrals (resizes that waited for room on their node), fallbacks
(in-place resizes given up: the pod evicted and replaced), violation-minutes, cost and core-hours.

The scenarios: ``examples/scenarios/diurnal-resize.yaml`` (a workload whose cheapest pod size
changes over the day), and ``--generated N`` generated ones: the first N drawn from seeds
``B+1, B+2, ...`` whose admin enables the ``cpu`` actuator (the only ones a resize can happen
in), each run for at most ``--generated-duration`` seconds to keep the bench bounded.

    python bench/resize.py [--seeds 1 2 3] [--generated 5] [--generated-seeds 1] [--json]
                           [--from-json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCENARIO = ROOT / "examples" / "scenarios" / "diurnal-resize.yaml"
START = 1_767_225_600.0
GENERATED = "generated:"
COUNTS = ("restarts", "in_place_resizes", "resize_deferrals", "resize_fallbacks")
FIGURES = (*COUNTS, "violation_minutes", "cost", "core_hours", "actions")
MODES = {"in-place": True, "rollout": False}


def document(ref: str) -> tuple[dict[str, Any], str, Path]:
    """A scenario's document, its source name and the directory its files are relative to:
    a YAML path, or ``generated:<seed>``."""
    from planner.domain.safeload import load_file
    from simulator.generate import SCENARIO_DIR, generate

    if ref.startswith(GENERATED):
        doc = generate(int(ref.removeprefix(GENERATED)))
        return doc, str(doc["name"]), SCENARIO_DIR
    path = Path(ref)
    docs = load_file(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise SystemExit(f"{ref}: not a scenario file (one YAML mapping)")
    return docs[0], str(path), path.parent


def scenario(ref: str, in_place: bool, duration: float | None = None) -> Any:
    """The scenario ``ref`` names with in-place resize set to ``in_place`` (and ``duration``
    seconds at most), all else as the document says."""
    from simulator.scenario import Scenario, parse_scenario

    doc, source, base = document(ref)
    doc = {**doc, "cluster": {**doc["cluster"], "in_place_resize": in_place}}
    sc = parse_scenario(doc, source, base)
    if duration is None or duration >= sc.spec.duration:
        return sc
    return Scenario(sc.spec.model_copy(update={"duration": duration}), sc.intents, sc.profiles,
                    sc.base_dir)


def resizable(seed: int) -> bool:
    """Whether the scenario generated from ``seed`` lets the planner change the CPU size."""
    from simulator.generate import generate

    return "cpu" in generate(seed)["admin"]["actuators"]


def run_one(ref: str, mode: str, seed: int, planner: str, duration: float | None
            ) -> dict[str, Any]:
    from knowledge.connect import open_knowledge_base
    from simulator.runner import ScenarioRun

    sc = scenario(ref, MODES[mode], duration)
    t0 = time.perf_counter()
    report = ScenarioRun(sc, planner, seed, open_knowledge_base(None),
                         start_time=START).run().as_dict()
    active = {i.key for i in sc.intents if i.spec.active}
    rows = [v for k, v in report["intents"].items() if k in active]
    out: dict[str, Any] = {"scenario": sc.name, "mode": mode, "seed": seed,
                           "planner": planner, "duration_s": report["duration_s"]}
    for f in FIGURES:
        total = sum(r[f] for r in rows)
        out[f] = round(total, 3) if isinstance(total, float) else total
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per scenario and mode, each figure summed over the seeds."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in rows:
        t = out.setdefault(r["scenario"], {}).setdefault(r["mode"], dict.fromkeys(FIGURES, 0))
        for f in FIGURES:
            t[f] = round(t[f] + r[f], 3)
    return out


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    head = ("scenario", "seed", "mode", "restarts", "in-place", "deferred", "fallback",
            "viol-min", "cost", "core-h", "actions")
    fmt = "{:<16} {:>4} {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7}"
    print(fmt.format(*head))

    def line(name: str, seed: str, mode: str, r: dict[str, Any]) -> None:
        print(fmt.format(name, seed, mode, r["restarts"], r["in_place_resizes"],
                         r["resize_deferrals"], r["resize_fallbacks"], r["violation_minutes"],
                         f"{r['cost']:.2f}", f"{r['core_hours']:.1f}", r["actions"]))

    for r in sorted(rows, key=lambda r: (r["scenario"], r["seed"], r["mode"])):
        line(r["scenario"], str(r["seed"]), r["mode"], r)
    print()
    for name, modes in summary["totals"].items():
        for mode, t in sorted(modes.items()):
            line(name, "all", mode, t)
    print(f"\n{summary['planner']}, seeds {summary['seeds']}, {summary['wall_s']} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--planner", default="grid")
    ap.add_argument("--scenarios", nargs="*", default=[str(SCENARIO)],
                    help="scenario files (default: diurnal-resize; none: generated only)")
    ap.add_argument("--generated", type=int, default=0, metavar="N",
                    help="also run the first N generated scenarios with the cpu actuator")
    ap.add_argument("--generated-seed-base", type=int, default=0, metavar="B",
                    help="generated scenarios are looked for from seed B+1 on")
    ap.add_argument("--generated-seeds", type=int, nargs="+", default=[1],
                    help="run seeds of the generated scenarios (default: 1)")
    ap.add_argument("--generated-duration", type=float, default=3600.0,
                    help="seconds a generated scenario runs at most (default 3600)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--from-json", metavar="FILE",
                    help="print the table of a saved --json output instead of running")
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        print_table(saved["runs"], saved)
        return
    gen: list[str] = []
    seed = args.generated_seed_base
    while len(gen) < args.generated:
        seed += 1
        if resizable(seed):
            gen.append(f"{GENERATED}{seed}")
    jobs = [(ref, mode, s, args.planner, None) for ref in args.scenarios
            for s in args.seeds for mode in MODES]
    jobs += [(ref, mode, s, args.planner, args.generated_duration) for ref in gen
             for s in args.generated_seeds for mode in MODES]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(run_one, *zip(*jobs, strict=True)))
    summary = {"planner": args.planner, "seeds": args.seeds,
               "generated": gen, "generated_seeds": args.generated_seeds,
               "wall_s": round(time.perf_counter() - t0, 1), "runs": rows,
               "totals": totals(rows)}
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
        return
    print_table(rows, summary)


if __name__ == "__main__":
    main()
