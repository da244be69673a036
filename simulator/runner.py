"""Run a scenario: the simulated cluster, the intent controller and the accounting, in step.

``run`` paces the simulation against the wall clock (``speed`` x real time) or, with
``speed=None``, runs as fast as the CPU allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knowledge.base import KnowledgeBase, KnowledgeBaseUnavailable
from planner.control import wiring
from planner.control.outcome import IntentOutcome
from planner.domain.ports import StaticIntentSource
from planner.planners import registry as planner_registry
from simulator.accounting import Accountant
from simulator.cluster import SimulatedCluster
from simulator.resize import DisruptionCounts
from simulator.scenario import Scenario

CycleCallback = Callable[[SimulatedCluster, list[IntentOutcome]], None]


@dataclass
class RunReport:
    scenario: str
    planner: str
    seed: int
    duration_s: float
    intents: dict[str, dict[str, Any]]
    cycles: int
    wall_s: float
    plan_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        lat = np.asarray(self.plan_ms) if self.plan_ms else np.zeros(1)
        return {
            "scenario": self.scenario, "planner": self.planner, "seed": self.seed,
            "duration_s": self.duration_s, "cycles": self.cycles, "wall_s": round(self.wall_s, 3),
            "intents": self.intents,
            "totals": {
                "violation_minutes": sum(i["violation_minutes"] for i in self.intents.values()),
                "core_hours": round(sum(i["core_hours"] for i in self.intents.values()), 3),
                "cost": round(sum(i["cost"] for i in self.intents.values()), 3),
                "actions": sum(i["actions"] for i in self.intents.values()),
                **{k: sum(i.get(k, 0) for i in self.intents.values()) for k in DISRUPTION},
                "plan_ms_p50": round(float(np.percentile(lat, 50)), 3),
                "plan_ms_p99": round(float(np.percentile(lat, 99)), 3),
            },
        }


DISRUPTION = tuple(DisruptionCounts().as_dict())
"""The per-intent counts of restarts and in-place resizes the totals sum."""
DEFAULT_START = 1_767_225_600.0
"""Where a simulated clock starts unless told (2026-01-01T00:00Z): runs are reproducible."""
RESUME_GAP_S = 60.0


def resumed_start(knowledge: KnowledgeBase, start: float) -> float:
    """Where the simulated clock starts on a knowledge base kept from an earlier run (a
    directory or MongoDB): a minute after its newest event when that is later than ``start``.
    Models and planner memory are looked up by time; a clock behind what was learned (a run at
    60x real time ends hours ahead of the wall clock) would not use them yet."""
    try:
        newest = knowledge.events(limit=1)
    except KnowledgeBaseUnavailable:
        return start
    if not newest or not isinstance(newest[0].get("time"), int | float):
        return start
    return max(start, float(newest[0]["time"]) + RESUME_GAP_S)


class ScenarioRun:
    """One run of a scenario with one planner; step it yourself or call :meth:`run`."""

    def __init__(self, scenario: Scenario, planner: str | None = None, seed: int | None = None,
                 knowledge: KnowledgeBase | None = None, start_time: float | None = None,
                 threaded_training: bool = False, keep_heap: bool = False) -> None:
        from knowledge.connect import open_knowledge_base

        self.scenario = scenario
        self.seed = scenario.spec.seed if seed is None else seed
        admin = scenario.spec.admin
        if planner is not None:
            # A planner spec (``hpa@60``) is checked and applied here; every namespace uses it.
            admin = planner_registry.with_spec(admin, planner).model_copy(
                update={"planners_by_namespace": {}})
        self.admin = admin
        self.sim = SimulatedCluster(scenario, self.seed,
                                    start_time=DEFAULT_START if start_time is None
                                    else start_time)
        self.source = StaticIntentSource(scenario.intents, scenario.profiles)
        self.knowledge = knowledge if knowledge is not None else open_knowledge_base(None)
        built = wiring.build_controller(self.sim, self.sim, self.source, self.knowledge, admin,
                                        threaded_training=threaded_training,
                                        keep_heap=keep_heap)
        self.controller = built.controller
        self.trainer = built.trainer
        self.heap = built.heap
        """The garbage-collector keeper (``keep_heap``: for a process that runs this
        simulation, as the CLI does; see :mod:`planner.control.heap`)."""
        self.accountant = Accountant(self.sim, scenario.intents, self.source.profiles())
        self.step_s = scenario.spec.step_s
        self.cycle_s = admin.cycle_s
        self._next_cycle = 0.0
        self._next_minute = 60.0
        self.plan_ms: list[float] = []
        self.last: list[IntentOutcome] = []

    @property
    def elapsed(self) -> float:
        return self.sim.elapsed

    def advance(self) -> list[IntentOutcome] | None:
        """One simulation step; runs a controller cycle when one is due."""
        outcomes = None
        if self.elapsed + 1e-9 >= self._next_cycle:
            outcomes = self.controller.cycle()
            self._next_cycle += self.cycle_s
            for o in outcomes:
                ms = o.plan.planning_ms if o.plan is not None else None
                if ms is not None:
                    self.plan_ms.append(ms)
                self.accountant.record_cycle(o.intent.key, ms, len(o.applied))
            self.last = outcomes
        self.sim.step(self.step_s)
        self.accountant.after_step(self.step_s)
        if self.elapsed + 1e-9 >= self._next_minute:
            self.accountant.minute()
            self._next_minute += 60.0
        return outcomes

    def run(self, duration: float | None = None, speed: float | None = None,
            on_cycle: CycleCallback | None = None,
            on_progress: Callable[[float], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> RunReport:
        total = self.scenario.spec.duration if duration is None else duration
        wall0 = time.perf_counter()
        while self.elapsed + 1e-9 < total:
            if should_stop is not None and should_stop():
                break
            outcomes = self.advance()
            if outcomes is not None and on_cycle is not None:
                on_cycle(self.sim, outcomes)
            if on_progress is not None:
                on_progress(min(self.elapsed, total))
            if speed is not None:
                lag = self.elapsed / speed - (time.perf_counter() - wall0)
                if lag > 0:
                    time.sleep(lag)
        return self.report(time.perf_counter() - wall0)

    def report(self, wall_s: float) -> RunReport:
        return RunReport(self.scenario.name, self.admin.planner, self.seed, self.elapsed,
                         {k: t.as_dict() for k, t in self.accountant.tallies.items()},
                         self.controller.cycles, wall_s, list(self.plan_ms))
