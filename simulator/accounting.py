"""SLO attainment and resource accounting of a simulated run.

Attainment is the fraction of minutes in which an objective held, judged on the true KPI over
that minute (no measurement noise), honouring the objective's tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.domain.intents import Intent, KPIProfile, objective_met, objective_profiles
from simulator.cluster import SimulatedCluster, kpi_value
from simulator.resize import DisruptionCounts


@dataclass
class ObjectiveTally:
    target: float
    minutes: int = 0
    held: int = 0

    @property
    def violation_minutes(self) -> int:
        return self.minutes - self.held

    @property
    def attainment(self) -> float:
        return 1.0 if self.minutes == 0 else self.held / self.minutes


@dataclass
class IntentTally:
    workload: str
    objectives: dict[str, ObjectiveTally]
    core_hours: float = 0.0
    gpu_hours: float = 0.0
    cost: float = 0.0
    actions: int = 0
    plan_ms: list[float] = field(default_factory=list)
    pool_core_hours: dict[str, float] = field(default_factory=dict)
    """Core-hours per node pool the workload's pods (its canary's included) ran in."""
    disruption: DisruptionCounts = field(default_factory=DisruptionCounts)
    """The workload's restarts and in-place resizes (the simulator's own counts)."""

    def as_dict(self) -> dict[str, Any]:
        lat = np.asarray(self.plan_ms) if self.plan_ms else np.zeros(1)
        return {
            "workload": self.workload,
            "objectives": {n: {"target": t.target, "attainment": round(t.attainment, 4),
                               "violation_minutes": t.violation_minutes, "minutes": t.minutes}
                           for n, t in self.objectives.items()},
            "violation_minutes": sum(t.violation_minutes for t in self.objectives.values()),
            "core_hours": round(self.core_hours, 3),
            "gpu_hours": round(self.gpu_hours, 3),
            "cost": round(self.cost, 3),
            "actions": self.actions,
            **self.disruption.as_dict(),
            "pool_core_hours": {p: round(h, 3) for p, h in sorted(self.pool_core_hours.items())},
            "plan_ms_p50": round(float(np.percentile(lat, 50)), 3),
            "plan_ms_p99": round(float(np.percentile(lat, 99)), 3),
        }


class Accountant:
    """Tallies a run minute by minute."""

    def __init__(self, sim: SimulatedCluster, intents: list[Intent],
                 profiles: dict[str, KPIProfile]) -> None:
        self.sim = sim
        self.intents = intents
        self.profiles = {i.key: objective_profiles(i, profiles)[0] for i in intents}
        """Per intent, the KPIProfile of each objective."""
        self.tallies = {
            i.key: IntentTally(i.workload_key, {o.name: ObjectiveTally(o.value)
                                                for o in i.spec.objectives},
                               disruption=sim.workloads[i.workload_key].disruption)
            for i in intents
        }

    def after_step(self, dt: float) -> None:
        for i in self.intents:
            recs = self.sim.window(i.workload_key, seconds=dt + 1e-9)
            if recs:
                r = recs[-1]
                t = self.tallies[i.key]
                t.core_hours += r.cores * r.dt / 3600.0
                t.gpu_hours += r.gpus * r.dt / 3600.0
                t.cost += r.cost_per_hour * r.dt / 3600.0
                for pool, cores in r.pool_cores:
                    t.pool_core_hours[pool] = (t.pool_core_hours.get(pool, 0.0)
                                               + cores * r.dt / 3600.0)

    def minute(self) -> None:
        """Judge the minute that just ended."""
        for i in self.intents:
            recs = self.sim.window(i.workload_key, seconds=60.0)
            for o in i.spec.objectives:
                prof = self.profiles[i.key][o.name]
                met = objective_met(kpi_value(prof, recs), o, prof)
                tally = self.tallies[i.key].objectives[o.name]
                tally.minutes += 1
                tally.held += 1 if met in (True, None) else 0

    def record_cycle(self, intent: str, plan_ms: float | None, actions: int) -> None:
        t = self.tallies[intent]
        if plan_ms is not None:
            t.plan_ms.append(plan_ms)
        t.actions += actions
