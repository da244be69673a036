"""The :class:`Planner` extension point and what a planner is given."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from actuators.base import Actuator
from actuators.replicas import ReplicasActuator
from knowledge.base import KnowledgeBase
from planner.domain.admin import AdminConfig
from planner.domain.intents import Intent, KPIProfile
from planner.domain.memory import EMPTY, Memory
from planner.domain.plan import Action, Plan
from planner.domain.state import ClusterSnapshot, WorkloadConfig, WorkloadState
from planner.planners import capacity


@dataclass(frozen=True)
class ShapeOption:
    """One shape an intent could run in this cycle: the fewest replicas of it predicted to
    meet every objective (``config``) and what that costs per hour. What a planner offers
    when intents that compete for capacity are planned together."""

    config: WorkloadConfig
    cost_per_hour: float


def without_knobs(actuators: Mapping[str, Actuator], knobs: frozenset[str]
                  ) -> Mapping[str, Actuator]:
    """``actuators`` less those that turn any of ``knobs`` (an intent's fixed knobs:
    :func:`planner.domain.use_case.fixed_knobs`)."""
    if not knobs:
        return actuators
    return {n: a for n, a in actuators.items() if not knobs & set(a.knobs)}


@dataclass(frozen=True)
class PlanningContext:
    """Everything a planner may look at for one intent in one cycle."""

    intent: Intent
    profiles: Mapping[str, KPIProfile]
    """KPI profile per objective name."""
    workload: WorkloadState
    snapshot: ClusterSnapshot
    current: Mapping[str, float | None]
    """Observed value per objective name (``None``: unknown)."""
    admin: AdminConfig
    actuators: Mapping[str, Actuator]
    knowledge: KnowledgeBase | None
    now: float
    memory: Memory = field(default_factory=dict)
    """The planner's own memory of this intent (what its last plan returned as
    :attr:`Plan.memory`; empty at first sight or after another planner)."""
    actuator_memory: Mapping[str, Memory] = field(default_factory=dict)
    """Each actuator's memory of this intent, by actuator name."""
    placement: WorkloadConfig | None = None
    """The shape (CPU size, device, pool; not the replicas) that planning the intents who
    compete for capacity together assigned this intent (:mod:`planner.planners.joint`):
    the planner chooses the replicas within it. ``None``: any shape."""
    vetoed: tuple[tuple[float, str, str | None], ...] = ()
    """Shapes (CPU size, device, pool) whose rollout the safety layer rolled back as stuck and
    does not start again yet (:mod:`planner.planners.safety`, rule 4). A planner that leaves
    them out plans within the other shapes; a plan that picks one has its shape replaced by
    the current one."""

    @property
    def config(self) -> WorkloadConfig:
        return self.workload.config


class PlannerOptions(BaseModel):
    """The options a planner takes from the admin's ``plannerOptions.<name>`` (camelCase keys,
    as every admin field). The base takes none: an unknown key is an error naming it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Planner(ABC):
    """Turns a :class:`PlanningContext` into a :class:`planner.domain.plan.Plan`.

    Contract:

    * ``plan`` never mutates the cluster, and keeps no per-intent state in the instance: what
      it remembers between cycles comes in as ``ctx.memory`` and goes out as the plan's
      ``memory`` (JSON-safe data, :mod:`planner.domain.memory`), which the controller persists
      and restores after a restart. Caches of what can be re-read (models from the knowledge
      base) are allowed; they must not change a decision.
    * The plan's ``target`` uses only knobs of enabled actuators, within the admin's bounds;
      its ``actions`` come from :func:`steps_towards` (so every action respects step limits
      and cooldowns). An unknown objective value yields an empty plan with the reason.
    * ``predicted`` holds the planner's expected value for each objective it can predict.
    * The plan carries what was planned (:mod:`planner.planners.plan_details` computes it):
      ``planned_rate`` (the load it sized for), ``steps`` (predicted by the planner's own
      predictors at that load), ``models`` and the reason as ``reason_parts``. A preview
      shows exactly these; nothing is recomputed elsewhere.
    """

    name: ClassVar[str]
    uses_models: ClassVar[bool] = False
    """True for planners that read learned effect models (the controller then trains them)."""
    baseline: ClassVar[bool] = False
    """True for a planner that emulates another system as a reference (``hpa``): the safety
    layer (:mod:`planner.planners.safety`) leaves its plans as they are."""
    options: ClassVar[type[PlannerOptions]] = PlannerOptions
    """What ``plannerOptions.<name>`` may hold (validated by the registry before
    :meth:`from_options` is called)."""
    shorthand: ClassVar[str | None] = None
    """The option a planner spec ``name@value`` sets (``hpa@60``), if the planner has one."""

    @classmethod
    def from_options(cls, options: PlannerOptions) -> Planner:
        """A planner configured by validated ``options`` (an instance of :attr:`options`).
        The default takes none and calls the constructor without arguments."""
        return cls()

    @abstractmethod
    def plan(self, ctx: PlanningContext) -> Plan: ...

    def shape_options(self, ctx: PlanningContext) -> list[ShapeOption] | None:
        """Per shape (CPU size, device, pool) the planner may choose, the cheapest
        configuration it predicts meets every objective at this cycle's load, cheapest
        first; shapes where none does are left out. ``None``: the planner cannot say (it is
        then planned alone, after the intents it competes with). Pure, like :meth:`plan`;
        ``ctx.placement`` is ignored."""
        return None


def steps_towards(ctx: PlanningContext, target: WorkloadConfig) -> list[Action]:
    """The actions of every enabled actuator that move the workload towards ``target``.

    Each actuator steps on its own, so a move of device and pool together may come out half
    done: the pool moved while the device change waits (a cooldown). A step that would leave
    GPU pods in a pool without GPUs (they could never be scheduled) holds the pool move until
    the device moves too; the other way round, a device switch (or CPU size step) whose pool
    move waits, where its pods would not fit the pool they stay in, waits with it
    (:func:`_fitting_as_enacted`)."""
    actions: list[Action] = []
    for name, act in ctx.actuators.items():
        actions.extend(act.steps(ctx.workload.key, ctx.config, target, ctx.now,
                                 ctx.actuator_memory.get(name, EMPTY)))
    device = next((str(a.params["device"]) for a in actions if "device" in a.params),
                  ctx.config.device)
    moves = [a for a in actions if "pool" in a.params]
    if device == "gpu" and moves:
        pool = moves[0].params["pool"]
        if pool is not None and pool not in ctx.snapshot.facts.first_gpu_in_pool:
            actions = [a for a in actions if a not in moves]
            mover = ctx.actuators.get(moves[0].actuator)
            if mover is not None:
                mover.held[ctx.workload.key] = (
                    f"move to {pool} held: GPU pods cannot run there, and the device change "
                    "waits")
    return _fitting_as_enacted(ctx, target, actions[: ctx.admin.max_actions_per_cycle])


def after(cfg: WorkloadConfig, action: Action) -> WorkloadConfig:
    """``cfg`` once ``action`` is applied (the knobs its params name; others unchanged)."""
    params = action.params
    changes: dict[str, Any] = {}
    if "replicas" in params:
        changes["replicas"] = int(params["replicas"])
    if "cpu" in params:
        changes["cpu"] = float(params["cpu"])
    if "device" in params:
        changes["device"] = str(params["device"])
    if "pool" in params:
        changes["pool"] = None if params["pool"] is None else str(params["pool"])
    return cfg.with_(**changes)


SHAPE_KNOBS = frozenset({"cpu", "device", "pool"})


def _fitting_as_enacted(ctx: PlanningContext, target: WorkloadConfig,
                        actions: list[Action]) -> list[Action]:
    """``actions`` without a shape change that would be enacted in another place (device,
    pool) than the target's, in a shape the cluster cannot schedule, and without the replica
    step that was to come with it. One part of the change waits (a pool move under its
    cooldown, or cut by the admin's actions per cycle) and the other would leave the pods
    where they cannot run: on gen-2183 a switch to GPU pods went ahead while the move out of
    the GPU-less pool the workload was pinned to waited, and GPU pods were left Pending there
    until the stuck rollout was rolled back (docs/benchmarks.md section 58). The change, and
    the count sized for it, wait until the pool may move; the current count stays. A CPU
    size on its way to the target's, one size a cycle, goes ahead (its place is the
    target's). A change whose count alone is held back, by the scale-down cooldown or the
    step limit, goes ahead too: its surplus pods wait for room while the old ones serve
    (taking the count to the room at once was tried, section 58)."""
    if not any(SHAPE_KNOBS & a.params.keys() for a in actions):
        return actions
    enacted = ctx.config
    for a in actions:
        enacted = after(enacted, a)
    if (enacted.device, enacted.pool) == (target.device, target.pool):
        return actions
    fits = capacity.schedulable_replicas(ctx.workload, ctx.snapshot, enacted)
    if enacted.replicas <= fits:
        return actions
    out = []
    for a in actions:
        if not (SHAPE_KNOBS | {"replicas"}) & a.params.keys():
            out.append(a)
            continue
        act = ctx.actuators.get(a.actuator)
        if act is not None:
            act.held[ctx.workload.key] = (
                f"{a.actuator} step held: only part of the change to "
                f"{target.device} " + (f"in {target.pool}" if target.pool else "anywhere")
                + f" can be made this cycle, and {enacted.replicas} x "
                f"{enacted.cpu:g} cpu {enacted.device}"
                + (f" in {enacted.pool}" if enacted.pool else "")
                + f" would not fit the cluster (room for {fits})")
    return out


def scaler_of(ctx: PlanningContext) -> ReplicasActuator | None:
    """The enabled actuator that sets the replica count (``replicas`` or a drop-in
    replacement such as ``remove-pod``), when it is one."""
    for act in ctx.actuators.values():
        if "replicas" in act.knobs and isinstance(act, ReplicasActuator):
            return act
    return None


def held_reasons(ctx: PlanningContext) -> list[str]:
    return [r for a in ctx.actuators.values() if (r := a.held.get(ctx.workload.key))]


def clip_target(ctx: PlanningContext, target: WorkloadConfig) -> WorkloadConfig:
    """Knobs of disabled actuators stay as they are; enabled ones are clipped to bounds."""
    enabled = {k for a in ctx.actuators.values() for k in a.knobs}
    cur = ctx.config
    out = WorkloadConfig(
        replicas=target.replicas if "replicas" in enabled else cur.replicas,
        cpu=target.cpu if "cpu" in enabled else cur.cpu,
        device=target.device if "device" in enabled else cur.device,
        pool=target.pool if "pool" in enabled else cur.pool,
    )
    for a in ctx.actuators.values():
        out = a.clip(out)
    return out
