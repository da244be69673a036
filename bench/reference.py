"""A reactive reference with perfect foresight, held to the limits every planner has.

The oracle (``bench/oracle.py``) asks, minute by minute, what the cheapest configuration
meeting every objective is; it ignores how a configuration is reached: pods take their
start-up time, the admin's ``maxStep`` and cooldowns bound each cycle's change, and a plan is
made once a cycle. So a scenario with sudden bursts larger than ``maxStep`` pods per cycle can
be "feasible every minute" for the oracle while no planner, however good, keeps it
(``docs/benchmarks.md`` section 9, gen-15).

This reference is what perfect knowledge achieves *within* those limits. Each cycle it knows
the load of the next ``start-up + cycle`` seconds (the trace, its noise included), and
asks for the fewest replicas of the current shape that meet every objective over that
window (the oracle's :func:`bench.oracle.fewest_replicas`); the actuators then apply it under
the same ``maxStep``, cooldowns and start-up as every planner, on the same simulator. Its
violation-minutes are the floor a planner can be held to: ``bench/slo.py`` prints the runs
where a planner violates more than 20 % of the objective-minutes beyond it.

:func:`run_reference` registers it as the planner ``reference`` for the run (``bench/slo.py``
calls it per scenario and seed); the scenario and seed come as its options. By default it
only scales replicas: where a shape change would help, the reference's violation-minutes are
an upper bound on the floor. With ``shapes`` it also changes shape (CPU size, device, node
pool) along the sequence :func:`bench.oracle_switching.switching` finds with the whole trace
known (the cheapest that changes at most once per cooldown, pays the old pods through the new
ones' start-up, and only where the rolling update's first step carries the load), each change
started a start-up and a cycle before its minute (a shape the actuators reach only in part
in a cycle, a cooldown or one CPU size at a time, is sized itself, and where no count of it
would do, the move waits: :func:`_step`); the actuators carry it out as they would a
planner's. It has no hand-over of its own: the
safety layer leaves a baseline as it is, and it asks for the new shape's count as the
rolling update starts, so the old pods beyond that count leave before the new ones are ready
(it violates more than a planner that holds them, and pays less for the overlap). Its cost is
perfect knowledge held to the admin's step limits, cooldowns and start-up, not a floor: the
bar ``docs/benchmarks.md`` section 46 measures grid against.

    python bench/reference.py --shapes --against GRID.json \\
        --scenarios $(python bench/gpu_scenarios.py --seeds 201..3000)

prints, per scenario, the reference's violation-minutes and cost (with ``--against``, a
``bench/slo.py --json`` output, grid's beside them) and the totals.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.oracle import Failures, Shape, fewest_replicas, requirements  # noqa: E402
from planner.domain.plan import Action, Plan  # noqa: E402
from planner.domain.state import WorkloadConfig  # noqa: E402
from planner.planners.base import (  # noqa: E402
    Planner,
    PlannerOptions,
    PlanningContext,
    steps_towards,
)
from planner.planners.registry import REGISTRY, register_planner  # noqa: E402

START = 1_767_225_600.0
"""The simulated clock's start (``ScenarioRun``'s default; ``bench/slo.py`` uses the same)."""
NAME = "reference"


class ReferenceOptions(PlannerOptions):
    scenario: str
    """A scenario reference as ``bench/slo.py`` takes it: a YAML path or ``generated:<seed>``."""
    seed: int
    shapes: bool = False
    """Change shape along the switching model's cheapest sequence too (see the module)."""


class ReferencePlanner(Planner):
    """Perfect foresight over start-up plus a cycle; replicas, and with ``shapes`` the
    switching model's shapes; see the module."""

    name = NAME
    baseline = True      # the safety layer leaves it as it is: it knows the future load
    options = ReferenceOptions

    def __init__(self, scenario: Any, seed: int, shapes: bool = False) -> None:
        spec = scenario.spec
        self.pools = spec.cluster.pools
        self.step_s = spec.step_s
        self.workloads = {w.key: w for w in spec.workloads}
        self.traces = {w.key: scenario.trace_for(w, seed) for w in spec.workloads}
        profiles = {p.key: p for p in scenario.profiles}
        self.needs = {i.key: requirements(i, profiles,
                                          Failures.of(self.workloads[i.workload_key],
                                                      spec.step_s))[0]
                      for i in scenario.intents if i.workload_key in self.workloads}
        self.paths: dict[str, list[Shape]] = {}
        if shapes:
            from bench.oracle_switching import switching

            self.paths = {k: v["path"] for k, v in switching(scenario, seed).items()}

    @classmethod
    def from_options(cls, options: PlannerOptions) -> Planner:
        from bench.slo import load

        assert isinstance(options, ReferenceOptions)
        return cls(load(options.scenario), options.seed, options.shapes)

    def plan(self, ctx: PlanningContext) -> Plan:
        key = ctx.workload.key
        cfg = ctx.config
        w, need = self.workloads.get(key), self.needs.get(ctx.intent.key)
        if w is None or need is None:
            return Plan(ctx.intent.key, self.name, cfg, cfg, reason="not in the scenario")
        start = ctx.now - START
        ahead = w.service.startup_s + ctx.admin.cycle_s
        rates = [self.traces[key].rate(start + k * self.step_s)
                 for k in range(math.ceil(ahead / self.step_s) + 1)]
        bounds = (max(1, ctx.admin.replicas.min), ctx.admin.replicas.max)

        def fits(shape: Shape) -> WorkloadConfig | None:
            fewest = fewest_replicas(w, self.pools, shape, rates, need,
                                     "weights" in ctx.admin.actuators, bounds)
            return None if fewest is None else cfg.with_(
                replicas=fewest, cpu=shape.cpu, device=shape.device, pool=shape.pool)

        def sized(shape: Shape) -> WorkloadConfig:
            return fits(shape) or cfg.with_(replicas=bounds[1], cpu=shape.cpu,
                                            device=shape.device, pool=shape.pool)

        goal = self._shape(ctx.intent.key, cfg, start + ahead)
        if not self.paths:
            target = sized(goal)
            return Plan(ctx.intent.key, self.name, cfg, target,
                        tuple(steps_towards(ctx, target)),
                        reason=f"{target.replicas} replica(s) meet every objective over the "
                               f"next {ahead:.0f} s (peak {max(rates):.0f} req/s, known ahead)")
        target, actions, how = _step(ctx, sized(goal), fits)
        return Plan(ctx.intent.key, self.name, cfg, target, tuple(actions),
                    reason=f"towards {goal} ({how}); {target.replicas} replica(s) of "
                           f"{_shape_of(target)} this cycle, for the next {ahead:.0f} s "
                           f"(peak {max(rates):.0f} req/s, known ahead)")

    def _shape(self, intent: str, cfg: WorkloadConfig, at_s: float) -> Shape:
        """The shape to run: the current one, or with ``shapes`` the switching model's shape
        of the minute ``at_s`` seconds into the trace (when the pods started now are ready)."""
        path = self.paths.get(intent)
        if not path:
            return _shape_of(cfg)
        return path[min(len(path) - 1, max(0, int(at_s // 60.0)))]


def _shape_of(cfg: WorkloadConfig) -> Shape:
    return Shape(cfg.cpu, cfg.device, cfg.pool)


def _reached(cfg: WorkloadConfig, actions: list[Action]) -> WorkloadConfig:
    """``cfg`` with the CPU size, device and pool ``actions`` set (their replicas aside)."""
    for a in actions:
        for knob in ("cpu", "device", "pool"):
            if knob in a.params:
                cfg = cfg.with_(**{knob: a.params[knob]})
    return cfg


def _step(ctx: PlanningContext, goal: WorkloadConfig,
          fits: Callable[[Shape], WorkloadConfig | None]
          ) -> tuple[WorkloadConfig, list[Action], str]:
    """This cycle's step of the reference towards ``goal`` (a shape sized for the load known
    ahead): where the actuators reach ``goal``'s shape only in part this cycle (a cooldown,
    a pool move held for a device change), the shape they do reach, sized itself; where no
    count of that shape meets the objectives (GPU pods of a quarter core turned into CPU
    pods of a quarter core while the CPU size waits), the move waits, the current shape
    sized. ``fits``: a shape sized for the load known ahead, ``None`` where no count of it
    does. No hand-over: a rolling update keeps old pods only up to the replica count less
    the new pods ready, as for any planner that asks for that count (see the module)."""
    cur = ctx.config
    towards = steps_towards(ctx, goal)
    reached = _shape_of(_reached(cur, towards))
    if reached == _shape_of(goal):
        return goal, towards, "reached this cycle"
    step = fits(reached)
    if step is not None:
        return step, steps_towards(ctx, step), "reached in part this cycle: that shape sized"
    stay = fits(_shape_of(cur)) or cur.with_(replicas=max(cur.replicas, goal.replicas))
    return stay, steps_towards(ctx, stay), (
        "the part reachable this cycle meets nothing at any count: the move waits")


@contextmanager
def registered() -> Iterator[None]:
    """The reference registered as the planner ``reference`` for the duration (not at import:
    a module that imports this one must not find an extra planner in the registry)."""
    register_planner(NAME)(ReferencePlanner)
    try:
        yield
    finally:
        REGISTRY.unregister(NAME)


def run_reference(ref: str, seed: int, duration: float | None = None,
                  shapes: bool = False) -> dict[str, Any]:
    """Violation-minutes, objective-minutes, core-hours and cost of the reference on scenario
    ``ref`` (the active intents, as ``bench/slo.py`` counts a planner's); ``shapes``: the
    reference that changes shape too (see the module)."""
    from bench.slo import load
    from knowledge.connect import open_knowledge_base
    from simulator.runner import ScenarioRun
    from simulator.scenario import Scenario

    sc = load(ref, duration)
    admin = sc.spec.admin.model_copy(update={
        "planner": NAME, "planners_by_namespace": {},
        "planner_options": {**sc.spec.admin.planner_options,
                            NAME: {"scenario": ref, "seed": seed, "shapes": shapes}}})
    sc = Scenario(sc.spec.model_copy(update={"admin": admin}), sc.intents, sc.profiles,
                  sc.base_dir)
    with registered():
        report = ScenarioRun(sc, None, seed, open_knowledge_base(None),
                             start_time=START).run(duration).as_dict()
    active = {i.key for i in sc.intents if i.spec.active}
    intents = [v for k, v in report["intents"].items() if k in active]
    return {"scenario": sc.name, "seed": seed,
            "violation_minutes": sum(v["violation_minutes"] for v in intents),
            "minutes": sum(o["minutes"] for v in intents for o in v["objectives"].values()),
            "core_hours": sum(v["core_hours"] for v in intents),
            "cost": sum(v["cost"] for v in intents),
            "gpu_hours": sum(v.get("gpu_hours", 0.0) for v in intents)}


def _run(job: tuple[str, int, bool]) -> dict[str, Any]:
    # Through the package, not ``__main__``: the planner registered must be the one
    # ``bench.reference`` defines (the script's own copy of the class is another class).
    from bench import reference

    ref, seed, shapes = job
    return reference.run_reference(ref, seed, shapes=shapes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="+", required=True,
                    help="scenario files or generated:<seed> references")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--shapes", action="store_true",
                    help="change shape along the switching model's sequence (see the module)")
    ap.add_argument("--against", nargs="*", default=[],
                    help="bench/slo.py --json outputs: their planner's runs beside")
    ap.add_argument("--planner", default="grid", help="the planner of --against to compare")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    theirs: dict[tuple[str, int], dict[str, Any]] = {}
    for path in args.against:
        theirs.update({(r["scenario"], r["seed"]): r
                       for r in json.loads(Path(path).read_text())["runs"]
                       if r["planner"] == args.planner})
    jobs = [(ref, seed, args.shapes) for seed in args.seeds for ref in args.scenarios]
    with ProcessPoolExecutor(max(1, args.workers)) as pool:
        rows = list(pool.map(_run, jobs))
    print(f"{'scenario':<16}{'seed':>5}{'ref viol':>9}{'ref cost':>10}{'ref GPU-h':>10}"
          f"{'viol':>7}{'cost':>9}{'GPU-h':>7}{'x ref':>7}   ({args.planner} beside)")
    total = Tally()
    held = Tally()
    gpu_ref = gpu_both = gpu_only_theirs = 0
    for r in rows:
        other = theirs.get((r["scenario"], r["seed"]))
        total.add(r, other)
        if other is not None and r["violation_minutes"] <= other["violation_minutes"]:
            held.add(r, other)
        mine_gpu, their_gpu = r["gpu_hours"] > 0, bool(other and other["gpu_hours"] > 0)
        gpu_ref += mine_gpu
        gpu_both += mine_gpu and their_gpu
        gpu_only_theirs += their_gpu and not mine_gpu
        print(f"{r['scenario']:<16}{r['seed']:>5}" + Tally.of(r, other).columns(), flush=True)
    print(f"{'total':<21}" + total.columns())
    if theirs:
        print(f"{f'where ref viol <= ({held.runs})':<21}" + held.columns())
        print(f"GPUs: the reference used them in {gpu_ref} of {len(rows)} runs; "
              f"{args.planner} in {gpu_both} of those, and in {gpu_only_theirs} others")


class Tally:
    """Summed reference and compared-planner figures over runs (the ratio over the runs
    both have)."""

    def __init__(self) -> None:
        self.runs = 0
        self.ref = [0.0, 0.0, 0.0]
        self.other: list[float] | None = None
        self.ref_cost_beside = 0.0

    @classmethod
    def of(cls, r: dict[str, Any], other: dict[str, Any] | None) -> Tally:
        t = cls()
        t.add(r, other)
        return t

    def add(self, r: dict[str, Any], other: dict[str, Any] | None) -> None:
        self.runs += 1
        self.ref = [a + b for a, b in zip(self.ref, (r["violation_minutes"], r["cost"],
                                                     r["gpu_hours"]), strict=True)]
        if other is not None:
            self.ref_cost_beside += r["cost"]
            self.other = [a + b for a, b in zip(self.other or [0.0, 0.0, 0.0],
                                                (other["violation_minutes"], other["cost"],
                                                 other["gpu_hours"]), strict=True)]

    def columns(self) -> str:
        rv, rc, rg = self.ref
        out = f"{int(rv):>9}{rc:>10.3f}{rg:>10.3f}"
        if self.other is not None:
            ov, oc, og = self.other
            out += f"{int(ov):>7}{oc:>9.3f}{og:>7.2f}{oc / max(self.ref_cost_beside, 1e-9):>7.3f}"
        return out


if __name__ == "__main__":
    main()
