"""Guardrails a cluster admin sets: which planner and actuators run, and within what bounds."""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.validation import spec_error


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ReplicaBounds(_Cfg):
    min: int = Field(default=1, ge=0)
    max: int = Field(default=100, ge=1)
    max_step: int = Field(default=10, ge=1, alias="maxStep")
    """Most replicas added or removed in one cycle."""
    cooldown_s: float = Field(default=60.0, ge=0, alias="cooldownSeconds")
    """After a change, no change in the opposite direction for this long (anti-flapping)."""

    @model_validator(mode="after")
    def _ordered(self) -> ReplicaBounds:
        if self.min > self.max:
            raise ValueError("replicas.min must be <= replicas.max")
        return self


class CpuBounds(_Cfg):
    sizes: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    """CPU sizes (cores per pod) the planner may choose."""
    cooldown_s: float = Field(default=300.0, ge=0, alias="cooldownSeconds")

    @model_validator(mode="after")
    def _positive(self) -> CpuBounds:
        if not self.sizes or any(s <= 0 for s in self.sizes):
            raise ValueError("cpu.sizes must be a non-empty list of positive core counts")
        return self


class UtilityWeights(_Cfg):
    """Multi-attribute utility: how much each unit of an attribute is worth to the admin."""

    cost: float = Field(default=1.0, ge=0)
    slo_risk: float = Field(default=1.0, ge=0, alias="sloRisk")
    disruption: float = Field(default=0.02, ge=0)


class AdminConfig(_Cfg):
    planner: str = "optuna"
    planners_by_namespace: dict[str, str] = Field(default_factory=dict, alias="plannersByNamespace")
    actuators: tuple[str, ...] = ("replicas",)
    replicas: ReplicaBounds = ReplicaBounds()
    cpu: CpuBounds = CpuBounds()
    devices: tuple[str, ...] = ("cpu", "gpu")
    pools: tuple[str, ...] | None = None
    """Node pools the planner may place on; ``None``: any."""
    budget_per_hour: float | None = Field(default=None, gt=0, alias="budgetPerHour")
    max_actions_per_cycle: int = Field(default=5, ge=1, alias="maxActionsPerCycle")
    cycle_s: float = Field(default=15.0, gt=0, alias="cycleSeconds")
    headroom: float = Field(default=0.1, ge=0, le=1)
    """Safety margin on the load the planner provisions for."""
    utility: UtilityWeights = UtilityWeights()

    def planner_for(self, namespace: str) -> str:
        return self.planners_by_namespace.get(namespace, self.planner)


def parse_admin(doc: dict[str, Any] | None, source: str = "", prefix: str = "admin") -> AdminConfig:
    if not doc:
        return AdminConfig()
    try:
        return AdminConfig.model_validate(doc)
    except pydantic.ValidationError as exc:
        raise spec_error(exc, source, prefix) from None
