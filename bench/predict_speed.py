"""The learned latency model's M/M/c mixture solve, a git revision's against the working tree's,
on the inputs a scenario run gives it (issue 13).

Runs a scenario with the grid planner, records the inputs of every mixture solve the learned
latency models make (``mixture_sojourn_quantile``, each call's arrays copied), then times that
function of ``--base`` (``planner/models/sojourn.py`` from ``git show``) and of the working tree
on them, alternating, in CPU time (``time.process_time``, best of ``--repeat``), split into
small calls (under 2,000 queue classes: a single candidate's ensemble) and large ones, and
checks that both give the same numbers bit for bit (NaN aware)::

    .venv/bin/python bench/predict_speed.py generated:306 --to 2400 --base d62eeb7
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import slo  # noqa: E402

SMALL = 2000
"""Queue classes (rows times classes) below which a call counts as small."""
Call = tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def record(scenario: str, seed: int, to: float | None) -> list[Call]:
    """Every mixture solve's inputs during the run, in order."""
    from planner.models import latency
    from simulator.runner import ScenarioRun

    calls: list[Call] = []
    solve = latency.mixture_sojourn_quantile

    def recording(q: float, lam: Any, mu: Any, c: Any, weight: Any,
                  iterations: int = 8) -> Any:
        calls.append((q, lam.copy(), mu.copy(), np.ascontiguousarray(c), weight.copy()))
        return solve(q, lam, mu, c, weight, iterations)

    latency.mixture_sojourn_quantile = recording  # type: ignore[assignment]
    try:
        ScenarioRun(slo.load(scenario), "grid", seed).run(duration=to)
    finally:
        latency.mixture_sojourn_quantile = solve  # type: ignore[assignment]
    return calls


def module_at(revision: str) -> ModuleType:
    """``planner/models/sojourn.py`` as it was at ``revision``, imported on its own."""
    text = subprocess.run(["git", "show", f"{revision}:planner/models/sojourn.py"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "sojourn_base.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("sojourn_base", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu(solve: Callable[..., Any], calls: list[Call]) -> float:
    """CPU seconds of ``solve`` over the calls."""
    start = time.process_time()
    for call in calls:
        solve(*call)
    return time.process_time() - start


def compare(base: Callable[..., Any], new: Callable[..., Any], calls: list[Call],
            repeat: int) -> dict[str, Any]:
    """Both solves' best CPU time over ``repeat`` alternated rounds, and their ratio."""
    rounds = [(cpu(base, calls), cpu(new, calls)) for _ in range(repeat)]
    b, n = min(r[0] for r in rounds), min(r[1] for r in rounds)
    return {"calls": len(calls), "classes": int(sum(c[1].size for c in calls)),
            "base_s": round(b, 4), "new_s": round(n, 4), "ratio": round(b / n, 3) if n else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="a scenario YAML or generated:<seed>[:tight]")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--to", type=float, default=None, help="last simulated second")
    parser.add_argument("--base", default="HEAD", help="git revision to compare against")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from planner.models import sojourn

    calls = record(args.scenario, args.seed, args.to)
    base = module_at(args.base).mixture_sojourn_quantile
    new = sojourn.mixture_sojourn_quantile
    with np.errstate(all="ignore"):
        differing = sum(not np.array_equal(base(*c), new(*c), equal_nan=True) for c in calls)
        small = [c for c in calls if c[1].size < SMALL]
        large = [c for c in calls if c[1].size >= SMALL]
        out = {"scenario": args.scenario, "base": args.base, "differing_calls": differing,
               "small": compare(base, new, small, args.repeat),
               "large": compare(base, new, large, args.repeat),
               "all": compare(base, new, calls, args.repeat)}
    print(json.dumps(out))
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
