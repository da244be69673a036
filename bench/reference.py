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
calls it per scenario and seed); the scenario and seed come as its options. It only scales
replicas: where a shape change would help, the reference's violation-minutes are an upper
bound on the floor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.oracle import Failures, Shape, fewest_replicas, requirements
from planner.domain.plan import Plan
from planner.planners.base import Planner, PlannerOptions, PlanningContext, steps_towards
from planner.planners.registry import REGISTRY, register_planner

START = 1_767_225_600.0
"""The simulated clock's start (``ScenarioRun``'s default; ``bench/slo.py`` uses the same)."""
NAME = "reference"


class ReferenceOptions(PlannerOptions):
    scenario: str
    """A scenario reference as ``bench/slo.py`` takes it: a YAML path or ``generated:<seed>``."""
    seed: int


class ReferencePlanner(Planner):
    """Perfect foresight over start-up plus a cycle; replicas only; see the module."""

    name = NAME
    baseline = True      # the safety layer leaves it as it is: it knows the future load
    options = ReferenceOptions

    def __init__(self, scenario: Any, seed: int) -> None:
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

    @classmethod
    def from_options(cls, options: PlannerOptions) -> Planner:
        from bench.slo import load

        assert isinstance(options, ReferenceOptions)
        return cls(load(options.scenario), options.seed)

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
        fewest = fewest_replicas(w, self.pools, Shape(cfg.cpu, cfg.device, cfg.pool), rates,
                                 need, "weights" in ctx.admin.actuators, bounds)
        target = cfg.with_(replicas=bounds[1] if fewest is None else fewest)
        return Plan(ctx.intent.key, self.name, cfg, target,
                    tuple(steps_towards(ctx, target)),
                    reason=f"{target.replicas} replica(s) meet every objective over the next "
                           f"{ahead:.0f} s (peak {max(rates):.0f} req/s, known ahead)")


@contextmanager
def registered() -> Iterator[None]:
    """The reference registered as the planner ``reference`` for the duration (not at import:
    a module that imports this one must not find an extra planner in the registry)."""
    register_planner(NAME)(ReferencePlanner)
    try:
        yield
    finally:
        REGISTRY.unregister(NAME)


def run_reference(ref: str, seed: int, duration: float | None = None) -> dict[str, Any]:
    """Violation-minutes, objective-minutes, core-hours and cost of the reference on scenario
    ``ref`` (the active intents, as ``bench/slo.py`` counts a planner's)."""
    from bench.slo import load
    from knowledge.connect import open_knowledge_base
    from simulator.runner import ScenarioRun
    from simulator.scenario import Scenario

    sc = load(ref, duration)
    admin = sc.spec.admin.model_copy(update={
        "planner": NAME, "planners_by_namespace": {},
        "planner_options": {**sc.spec.admin.planner_options,
                            NAME: {"scenario": ref, "seed": seed}}})
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
            "cost": sum(v["cost"] for v in intents)}
