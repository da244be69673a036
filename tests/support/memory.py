"""Planning in sequence as the controller does: each plan's memory is the next call's."""

from __future__ import annotations

from dataclasses import replace

from planner.domain.memory import Memory
from planner.domain.plan import Plan
from planner.planners.base import Planner, PlanningContext


class Remembering:
    """Wraps a planner; :meth:`plan` passes the memory the previous plan returned."""

    def __init__(self, planner: Planner, memory: Memory | None = None) -> None:
        self.planner = planner
        self.memory: Memory = dict(memory or {})

    @property
    def name(self) -> str:
        return self.planner.name

    def plan(self, ctx: PlanningContext) -> Plan:
        plan = self.planner.plan(replace(ctx, memory=self.memory))
        self.memory = plan.memory
        return plan
