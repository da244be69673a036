"""The safety layer: rules every plan passes, whichever planner made it.

A planner optimises; this layer keeps the optimisation from doing harm when its models are
wrong, missing or stale (BRIEF section 6, "Safety first, optimisation second"). The rules, in
the order they are applied to a plan's target:

1. **Saturated and violated -> scale out proportionally.** When a capacity objective
   (latency, availability, throughput) is observed violated and the pods are saturated
   (mean CPU utilisation >= :data:`SATURATED_UTILIZATION`), the target has at least as much
   capacity as HPA's proportional rule asks for: ``ceil(ready * utilisation / target)`` pods
   of the current size (converted to the target's CPU size), whatever a model predicts; the
   device does not switch then, except in rule 4's rollback of a stuck rollout, which goes
   back to the shape the pods ran before the change; there the ready pods of the rollback's
   device are counted in their own mean CPU size, not the stuck shape's (gen-360 seed 3
   kept a stuck switch to GPU for 18 minutes, its rollback to CPU held back as a switch while
   the CPU pods that served were saturated).
2. **No scale-in while violated.** While a capacity objective is observed violated, the
   target keeps at least the pods that are scheduled now.
3. **Never beyond what the cluster can schedule.** The target's replicas are capped at what
   fits: this workload's scheduled pods of the target's shape, plus the free room on the
   nodes that may host it (pool, GPUs), plus the room its old-shape pods there will free.
   Pending pods hold no room and are not counted. The cap never removes a scheduled pod.
   A shape change that does not fit is not started: the current shape stays, with the
   target's cores on the same device and its own count on another (cores do not compare
   across devices).
4. **A rollout that makes no progress is finished or undone.** When some desired pod stays
   unscheduled, no pod of the new shape is starting and none more got scheduled for
   :data:`STUCK_CYCLES` cycles: if the plan keeps the shape, nothing is observed violated and
   the pods of the shape already ready hold the plan's replicas, or the measured load of all the
   pods serving at the proportional rule's target (rule 1's, HPA's), the rollout is re-targeted
   to those ready pods (the replicas drop to them at once, as a finished rollout's do: the old
   pods and the waiting ones leave); otherwise a shape change (CPU size, device, pool) is rolled
   back to the shape before it, and that shape change is not tried again for :data:`VETO_S`; a
   scale-out is re-targeted to what fits (rule 3), and so is one that gets stuck after a
   rollout finished (every pod ready, of the shape and started since the change): that
   rollout is not undone. A rollback that is stuck too (its shape was rolled back from
   before) is not undone in turn: the shape more scheduled pods run stays, capped by rule 3
   (two shapes that both do not fit would otherwise alternate for as long as the vetoes
   last).
5. **No false claim.** A plan never says the objectives are met while one is observed
   violated: such reason parts are replaced by what is observed.

A planner that emulates another system as a baseline (``Planner.baseline``, e.g. ``hpa``) is
left as it is, so that it stays what it stands for.

What the layer remembers (the stuck-rollout watch and vetoed shapes) is data, returned with
the plan and kept by the controller in the intent's memory like any planner memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from planner.domain.cost import cost_per_hour
from planner.domain.intents import KPIType, objective_met
from planner.domain.memory import Memory
from planner.domain.plan import Plan, ReasonPart, join_reason
from planner.domain.state import WorkloadConfig
from planner.models.training import SATURATED_UTILIZATION
from planner.planners import capacity, exposure, plan_details
from planner.planners.base import (
    Planner,
    PlanningContext,
    clip_target,
    scaler_of,
    steps_towards,
)
from planner.planners.feedback import shape_of

PROPORTIONAL_TARGET = 0.8
"""The utilisation HPA's proportional rule sizes for in rule 1 (the ``hpa`` baseline's
default target)."""
STUCK_CYCLES = 4
"""Cycles without progress (a desired pod unscheduled, no new pod ready) that make a
rollout stuck."""
VETO_S = 3600.0
"""How long a rolled-back shape change is not tried again."""
CAPACITY_KPIS = (KPIType.LATENCY, KPIType.AVAILABILITY, KPIType.THROUGHPUT)
"""Objectives that more capacity helps (a violated cost or power objective is not a reason to
keep pods)."""
CLAIM_KINDS = ("hysteresis",)
"""Reason kinds that claim the objectives are met."""
Mode = Literal["", "rollback", "finish"]
"""What rule 4 did to a plan: nothing, a rollback, or a finish at the ready pods."""


@dataclass(frozen=True)
class Observation:
    """What the rules look at, read once from the context."""

    violated: tuple[str, ...]
    """Capacity objectives observed violated (throughput only when saturated: below a
    throughput target on an unsaturated workload is the offered load, not the capacity)."""
    saturated: bool
    utilization: float | None
    ready: int
    scheduled: int
    """Pods of the workload on a node (ready or starting)."""
    unscheduled: int
    """Pods waiting for room (Pending)."""


def observe(ctx: PlanningContext) -> Observation:
    util = ctx.workload.busy
    saturated = util is not None and util >= SATURATED_UTILIZATION
    violated: list[str] = []
    for o in ctx.intent.spec.objectives:
        kind = ctx.profiles[o.name].spec.type
        if kind not in CAPACITY_KPIS:
            continue
        if kind is KPIType.THROUGHPUT and not saturated:
            continue
        if objective_met(ctx.current.get(o.name), o, ctx.profiles[o.name]) is False:
            violated.append(o.name)
    counts = ctx.workload.pod_counts.items()
    return Observation(tuple(violated), saturated, util,
                       sum(n for (_, _, _, _, ready), n in counts if ready),
                       sum(n for (_, _, _, on_node, _), n in counts if on_node),
                       sum(n for (_, _, _, on_node, _), n in counts if not on_node))


# ---------------------------------------------------------------------- memory
def _shape_doc(cfg: WorkloadConfig) -> dict[str, Any]:
    return {"cpu": cfg.cpu, "device": cfg.device, "pool": cfg.pool}


@dataclass
class Watch:
    """The stuck-rollout watch and the vetoed shape changes (the layer's memory)."""

    shape: dict[str, Any] | None
    """The configuration's shape (CPU size, device, pool) last seen."""
    previous: dict[str, Any] | None
    """The shape before the last shape change: where a stuck rollout goes back to; ``None``
    once that rollout finished (:func:`_finished`)."""
    progress: int
    """Pods of the current shape scheduled when progress was last seen."""
    since: float
    """When progress was last seen (or the shape changed)."""
    vetoed: list[dict[str, Any]]
    changed: float | None = None
    """When the shape last changed, at the latest: when the watch last saw the shape before
    (the rollout's pods started after it). ``None`` in memory written before this was kept:
    then :attr:`since` stands in for it."""
    seen: float | None = None
    """When the watch last looked (the cycle before this one)."""

    @staticmethod
    def of(memory: Mapping[str, Any], now: float) -> Watch:
        vetoed = [dict(v) for v in memory.get("vetoed") or ()
                  if isinstance(v, Mapping) and float(v.get("until", 0.0)) > now]
        shape, previous, since = memory.get("shape"), memory.get("previous"), memory.get("since")
        changed, seen = memory.get("changed"), memory.get("seen")
        return Watch(dict(shape) if isinstance(shape, Mapping) else None,
                     dict(previous) if isinstance(previous, Mapping) else None,
                     int(memory.get("progress") or 0),
                     float(since) if isinstance(since, int | float) else now, vetoed,
                     float(changed) if isinstance(changed, int | float) else None,
                     float(seen) if isinstance(seen, int | float) else None)

    def as_memory(self) -> dict[str, Any]:
        return {"shape": self.shape, "previous": self.previous, "progress": self.progress,
                "since": self.since, "vetoed": self.vetoed, "changed": self.changed,
                "seen": self.seen}

    def vetoes(self, cfg: WorkloadConfig) -> bool:
        return any(v.get("cpu") == cfg.cpu and v.get("device") == cfg.device
                   and v.get("pool") == cfg.pool for v in self.vetoed)

    def veto(self, cfg: WorkloadConfig, until: float) -> None:
        if not self.vetoes(cfg):
            self.vetoed.append({**_shape_doc(cfg), "until": until})


def vetoed_shapes(memory: Mapping[str, Any], now: float
                  ) -> tuple[tuple[float, str, str | None], ...]:
    """The shapes the layer's ``memory`` vetoes at ``now`` (:attr:`PlanningContext.vetoed`)."""
    return tuple((float(v["cpu"]), str(v["device"]),
                  None if v.get("pool") is None else str(v["pool"]))
                 for v in Watch.of(memory, now).vetoed)


def _running_shape(ctx: PlanningContext, watch: Watch) -> WorkloadConfig | None:
    """Where a stuck rollout goes back to: the shape before the change when the watch saw it,
    else the shape most ready pods run (their pool the current pin when they run there, else
    unpinned); ``None`` when neither is known or it is the current shape."""
    cfg = ctx.config
    if watch.previous is not None:
        prev = cfg.with_(cpu=float(watch.previous["cpu"]), device=str(watch.previous["device"]),
                         pool=None if watch.previous.get("pool") is None
                         else str(watch.previous["pool"]))
        return prev if shape_of(prev) != shape_of(cfg) else None
    counts: dict[tuple[float, str, str | None], int] = {}
    for p in ctx.workload.pods:
        if p.ready and not capacity.runs(p, cfg):
            key = (p.cpu, p.device, cfg.pool if p.pool == cfg.pool else None)
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    cpu, device, pool = max(counts, key=lambda k: counts[k])
    return cfg.with_(cpu=cpu, device=device, pool=pool)


def _finished(ctx: PlanningContext, changed: float, in_place: bool = False) -> bool:
    """The rollout of the current shape, changed at ``changed``, finished: the workload has
    pods, every one of them ready, of the shape, and started since the change (an old pod
    that the shape also matches, as a move to unpinned pods matches every pool, is not the
    rollout's), and none waits for room. ``in_place``: the change was of the CPU size alone
    and the cluster resizes pods in place; a pod resized keeps its start time, and every pod
    of the new size is the change's."""
    wl = ctx.workload
    total = sum(wl.pod_counts.values())
    return (total > 0 and capacity.scheduled_running(wl, ctx.config, ready=True) == total
            and (in_place or all(p.started_at >= changed for p in wl.pods)))


def _resized_in_place(ctx: PlanningContext, previous: Mapping[str, Any],
                      shape: Mapping[str, Any]) -> bool:
    """Whether the change from the ``previous`` shape to ``shape`` resizes the pods in place:
    the cluster does so, and only the CPU size changed."""
    return (ctx.snapshot.in_place_resize and previous.get("device") == shape["device"]
            and previous.get("pool") == shape["pool"])


def _stuck(ctx: PlanningContext, obs: Observation, watch: Watch) -> bool:
    """Update the watch with this cycle; True when the rollout is stuck: a desired pod is
    unscheduled, no pod of the new shape is starting (nothing in flight, whatever the
    start-up time) and no more of them got scheduled for :data:`STUCK_CYCLES` cycles."""
    cfg = ctx.config
    shape = _shape_doc(cfg)
    mine = capacity.scheduled_running(ctx.workload, cfg)
    looked, watch.seen = watch.seen, ctx.now
    if watch.shape != shape:
        watch.previous = watch.shape
        watch.shape, watch.progress, watch.since = shape, mine, ctx.now
        watch.changed = looked if looked is not None else ctx.now
        return False
    if watch.previous is not None and _finished(
            ctx, watch.changed if watch.changed is not None else watch.since,
            _resized_in_place(ctx, watch.previous, shape)):
        # A scale-out that gets stuck after the rollout finished is not undone by rolling
        # the shape back (gen-4009: a resize of every pod ten minutes after the move).
        watch.previous = None
    if mine > watch.progress or obs.unscheduled == 0 or capacity.starting(ctx.workload, cfg):
        watch.progress, watch.since = mine, ctx.now
        return False
    return ctx.now - watch.since >= STUCK_CYCLES * ctx.admin.cycle_s - 1e-9


# ---------------------------------------------------------------------- the layer
def guard(ctx: PlanningContext, plan: Plan, memory: Memory,
          planner: Planner | None = None) -> tuple[Plan, dict[str, Any]]:
    """``plan`` after the rules, and the layer's new memory of the intent."""
    watch = Watch.of(memory, ctx.now)
    if planner is not None and planner.baseline:
        return plan, watch.as_memory()
    obs = observe(ctx)
    cur = ctx.config
    target, why, mode = _shape_rules(ctx, obs, watch, plan.target, plan.target_speed)
    target, sized = _size_rules(ctx, obs, target, plan.target_speed, mode == "rollback")
    why.extend(sized)
    target, fitted = _fit_rules(ctx, target, mode == "rollback")
    parts = list(plan.reason_parts)
    if obs.violated and any(p.kind in CLAIM_KINDS for p in parts):
        parts = [p for p in parts if p.kind not in CLAIM_KINDS]
        why.append(f"observed {', '.join(obs.violated)} violated although the models predict "
                   f"{shape_text(cur)} x {cur.replicas} meets every objective")
    if not why and not fitted:
        return plan, watch.as_memory()
    if why:
        parts.append(ReasonPart("safety", "; ".join(why)))
    if fitted:
        # Its own kind: the controller plans competing intents together when one is capped.
        parts.append(ReasonPart("capacity", "; ".join(fitted)))
    if target == plan.target and mode != "finish":
        return _with_parts(plan, parts), watch.as_memory()
    # Actions that turn no knob of the workload (a canary beside it) stay as planned.
    scaler = scaler_of(ctx)
    if mode == "finish" and scaler is not None and target.replicas < cur.replicas:
        moves = [scaler.finish_rollout(ctx.workload.key, cur, target.replicas)]
    else:
        moves = steps_towards(ctx, target)
    actions = [*moves, *(a for a in plan.actions if a.actuator in ctx.actuators
                         and not ctx.actuators[a.actuator].knobs)]
    known = {s.config: dict(s.predicted) for s in plan.steps}
    steps = tuple(replace(s, predicted=known.get(s.config, s.predicted))
                  for s in plan_details.plan_steps(ctx, actions, target))
    guarded = replace(plan, target=target, actions=tuple(actions), steps=steps,
                      chosen=plan.chosen if plan.chosen is not None else plan.target,
                      cost_per_hour=cost_per_hour(target, ctx.snapshot))
    return _with_parts(guarded, [*parts, *plan_details.held_parts(ctx, actions)]), \
        watch.as_memory()


def _with_parts(plan: Plan, parts: list[ReasonPart]) -> Plan:
    return replace(plan, reason_parts=tuple(parts), reason=join_reason(tuple(parts)))


def _shape_rules(ctx: PlanningContext, obs: Observation, watch: Watch,
                 target: WorkloadConfig, speed: float | None = None
                 ) -> tuple[WorkloadConfig, list[str], Mode]:
    """Rule 4: a stuck rollout is finished at its ready pods when they hold the plan, else
    rolled back (and kept rolled back while the current shape is vetoed, e.g. while a
    cooldown holds the rollback); a vetoed shape change is not started (the current shape is
    kept, sized for the same cores). The mode says "finish", "rollback" or nothing.

    A rollback keeps the replica count (or the ready pods, if more), except to the place the
    plan moves to at a measured ``speed`` (:attr:`Plan.target_speed`): there the pods that
    do the serving pods' work at that speed (:func:`work_in`), at least the plan's. One per
    serving pod would ask a GPU pool for a GPU per CPU pod, and the device change would wait
    for GPUs that are not there."""
    cur = ctx.config
    why: list[str] = []
    stuck = _stuck(ctx, obs, watch)
    finish = _finish(ctx, obs, target) if stuck and not obs.violated else None
    if finish is not None:
        ready, holds = finish
        why.append(f"rollout to {shape_text(cur)} cannot progress ({obs.unscheduled} pod(s) "
                   f"unscheduled, none starting, for {ctx.now - watch.since:.0f} s): "
                   f"finished at its {ready} ready pod(s), which hold {holds}; the old "
                   "and the waiting pods leave")
        return cur.with_(replicas=ready), why, "finish"
    back = _running_shape(ctx, watch) if stuck or watch.vetoes(cur) else None
    if back is not None and watch.vetoes(back):
        # Both shapes were rolled back as stuck (a rollback that did not fit either): no more
        # flipping between them. The shape more scheduled pods run stays; rule 3 caps its
        # replicas at what can be scheduled.
        on_cur = capacity.scheduled_running(ctx.workload, cur)
        on_back = capacity.scheduled_running(ctx.workload, back)
        keep_cur = on_cur >= on_back
        why.append(f"{shape_text(cur)} and {shape_text(back)} were both rolled back as stuck: "
                   f"{shape_text(cur if keep_cur else back)} kept, at what the cluster can "
                   "schedule of it")
        if keep_cur:
            return (target if shape_of(target) == shape_of(cur)
                    else cur.with_(replicas=max(on_cur, 1))), why, "rollback"
        return back.with_(replicas=max(on_back, 1)), why, "rollback"
    if back is not None:
        if stuck:
            watch.veto(cur, ctx.now + VETO_S)
            why.append(f"rollout to {shape_text(cur)} stuck ({obs.unscheduled} pod(s) unscheduled, "
                       f"none starting, no progress for {ctx.now - watch.since:.0f} s): rolled "
                       f"back to {shape_text(back)}, not retried for {VETO_S / 60:.0f} min")
        else:
            why.append(f"{shape_text(cur)} was rolled back as stuck: back to {shape_text(back)}")
        reps = max(cur.replicas, obs.ready, 1)
        if speed is not None and speed > 0 and (back.device, back.pool) == (target.device,
                                                                            target.pool):
            work = work_in(ctx, back, speed)
            if work is not None:
                reps = min(reps, max(work, target.replicas))
        return back.with_(replicas=reps), why, "rollback"
    if shape_of(target) == shape_of(cur):
        return target, why, ""
    if watch.vetoes(target):
        why.append(f"{shape_text(target)} was rolled back as stuck earlier: {shape_text(cur)} kept")
        return _same_cores(cur, target), why, ""
    return target, why, ""


def proportional(pods: int, utilization: float) -> int:
    """HPA's proportional rule: the pods that carry ``pods`` pods' load at
    :data:`PROPORTIONAL_TARGET` utilisation."""
    return math.ceil(pods * utilization / PROPORTIONAL_TARGET)


def proportional_of(busy: float) -> int:
    """The pods that carry ``busy`` pods' worth of work at :data:`PROPORTIONAL_TARGET`."""
    return math.ceil(busy / PROPORTIONAL_TARGET - 1e-9)


def _finish(ctx: PlanningContext, obs: Observation, target: WorkloadConfig
            ) -> tuple[int, str] | None:
    """Where a stuck rollout that ``target`` keeps the shape of can finish: its ready pods
    and what they hold (the plan's count, or the measured load of every pod serving now at
    the proportional rule's target, the rule HPA scales in by); ``None`` when they hold
    neither or no actuator sets the replica count. None of the shape's scheduled pods is
    starting (the rollout is stuck), so they are all ready and the waiting ones are what the
    count holds beyond them (counting the shape's ready pods instead would count old pods
    that happen to run on the new pool's nodes)."""
    cur = ctx.config
    ready = cur.replicas - obs.unscheduled
    if shape_of(target) != shape_of(cur) or scaler_of(ctx) is None \
            or not 0 < ready < cur.replicas:
        return None
    if 0 < target.replicas <= ready:
        return ready, f"the plan's {target.replicas}"
    util = obs.utilization
    if util is not None and obs.ready > 0 \
            and proportional(obs.ready, util) <= ready:
        return ready, f"the load of {obs.ready} pod(s) at {util:.0%} CPU"
    return None


def _same_cores(cur: WorkloadConfig, target: WorkloadConfig) -> WorkloadConfig:
    """The current shape with at least the cores ``target`` asks for; as it is when the
    device differs: neither cores nor counts compare across devices (gen-2183: 51 CPU pods
    that did not fit became 51 GPU pods, capped at the 6 GPUs free, where 2 served;
    docs/benchmarks.md section 58). Rule 1's proportional floor is what scales it out."""
    if target.device != cur.device:
        return cur
    return cur.with_(replicas=max(cur.replicas, math.ceil(
        target.replicas * target.cpu / cur.cpu - 1e-9)))


def _fit_rules(ctx: PlanningContext, target: WorkloadConfig, rolling_back: bool = False
               ) -> tuple[WorkloadConfig, list[str]]:
    """Rule 3: a shape change that does not fit the cluster is not started (a rollback is
    always started: its pods are the ones running): the current shape stays, with the
    target's cores on the same device, as it is on another; the replicas are capped as
    :func:`replica_cap` says."""
    cur = ctx.config
    why: list[str] = []
    if shape_of(target) != shape_of(cur) and not rolling_back:
        fits = capacity.schedulable_replicas(ctx.workload, ctx.snapshot, target)
        if target.replicas > fits:
            why.append(f"{shape_text(target)} x {target.replicas} does not fit the cluster (room "
                       f"for {fits}): {shape_text(cur)} kept")
            target = clip_target(ctx, _same_cores(cur, target))
    cap = replica_cap(ctx, target)
    if target.replicas > cap:
        capped = clip_target(ctx, target.with_(replicas=cap))
        why.append(f"capped at {capped.replicas} replica(s): what the cluster can schedule of "
                   f"{shape_text(target)} after this cycle's higher-priority plans (asked "
                   f"{target.replicas})")
        target = capped
    return target, why


def replica_cap(ctx: PlanningContext, cfg: WorkloadConfig) -> int:
    """Rule 3's cap on the replicas of ``cfg``'s shape: what the cluster can schedule of it,
    never below its pods scheduled now, nor below the current replicas while they all are on
    a node (a cap must not delete serving pods)."""
    wl = ctx.workload
    return max(capacity.schedulable_replicas(wl, ctx.snapshot, cfg),
               capacity.scheduled_running(wl, cfg),
               min(ctx.config.replicas, capacity.on_nodes(wl)))


def _size_rules(ctx: PlanningContext, obs: Observation, target: WorkloadConfig,
                speed: float | None = None, rolling_back: bool = False
                ) -> tuple[WorkloadConfig, list[str]]:
    """Rules 1 and 2. ``speed``: the capacity of one pod of ``target``'s device and pool over
    one current pod's, where measured (:attr:`Plan.target_speed`); a device change is then a
    scale-in only below the current pods' capacity in it, not below their count.
    ``rolling_back``: ``target`` is rule 4's rollback (or the shape it keeps), the shape the
    pods ran before the stuck change (or the one more scheduled pods run): it is not held
    back as a device switch while overloaded, and the ready pods are counted in their own
    CPU size (those of the rollback's device: cores do not compare across devices), not in
    the stuck shape's."""
    cur = ctx.config
    why: list[str] = []
    # The CPU size of the pods that serve: the current shape's, or (rolling back) the mean
    # size of the ready pods of the rollback's device.
    size = _ready_size(ctx, target) if rolling_back else cur.cpu
    if obs.violated and obs.saturated and obs.utilization is not None:
        if target.device != cur.device and not rolling_back:
            # Cores do not compare across devices; no device switch while overloaded (a
            # rollback goes back to the device its serving pods run on).
            why.append(f"{', '.join(obs.violated)} violated at saturation: no switch to "
                       f"{target.device} now")
            target = _same_cores(cur, target)
        base = obs.ready if obs.ready > 0 else cur.replicas
        floor_cores = proportional(base, obs.utilization) * size
        floor = max(base + 1, math.ceil(floor_cores / target.cpu - 1e-9))
        if target.replicas < floor:
            why.append(f"{', '.join(obs.violated)} violated at {obs.utilization:.0%} CPU: "
                       f"at least {floor} replica(s) (proportional rule, target "
                       f"{PROPORTIONAL_TARGET:.0%})")
            target = target.with_(replicas=floor)
    asked = target
    # Checked after the admin's bounds: a floor above the maximum, clipped, in a smaller CPU
    # size would otherwise hold fewer cores than the pods serving now.
    target = clip_target(ctx, target)
    keep = min(cur.replicas, obs.scheduled)
    # In cores when the device stays (a smaller CPU size is a scale-in too).
    held = work_in(ctx, target, speed) if speed is not None and speed > 0 else None
    if held is not None:
        need = held
    elif target.device == cur.device:
        need = math.ceil(keep * size / target.cpu - 1e-9)
    else:
        need = keep
    if obs.violated and target.replicas < need:
        why.append(f"{', '.join(obs.violated)} violated: no scale-in " + (
            f"(at least {need} x {shape_text(target)}: the work of the pods serving now, "
            f"measured {speed:.3g}x as fast there)" if held is not None else
            f"(at least {keep} x {size:g} cpu kept)"))
        # A smaller size that cannot hold those cores within the admin's bounds waits: the
        # current shape, with at least the cores asked for.
        target = target.with_(replicas=need) if need <= ctx.admin.replicas.max else \
            _same_cores(cur, asked)
    return clip_target(ctx, target), why


def _ready_size(ctx: PlanningContext, target: WorkloadConfig) -> float:
    """The mean CPU size of the workload's ready pods of ``target``'s device (``target``'s
    size when none is ready)."""
    pods = cores = 0.0
    for (cpu, device, _, _, ready), n in ctx.workload.pod_counts.items():
        if ready and device == target.device:
            pods += n
            cores += cpu * n
    return cores / pods if pods > 0 else target.cpu


def work_in(ctx: PlanningContext, target: WorkloadConfig, speed: float) -> int | None:
    """Rule 2 across devices: the pods of ``target``'s shape that do the work the ready pods
    do now at the proportional rule's target (the rule HPA sizes by), where a pod of another
    device or pool is ``speed`` times slower than one of ``target``'s (a trial measured it) and
    work is busy cores; ``None`` when no ready pod reports its utilisation, or every ready
    pod already runs on ``target``'s device and pool (then the rule counts pods, as ever). A
    GPU pod thirty times as fast as the CPU pods it replaces holds their work in a thirtieth of
    their count: counted in pods, the rule would keep thirty times the GPUs the cluster has,
    and the move that ends the violation could never finish."""
    work, known, across = 0.0, False, False
    for p in ctx.workload.pods:
        if not p.ready or p.busy is None:
            continue
        known = True
        busy = p.busy * p.cpu / target.cpu
        same = p.device == target.device and (target.pool is None or p.pool == target.pool)
        across = across or not same
        work += busy if same else busy / speed
    return max(1, proportional_of(work)) if known and across else None


def shape_text(cfg: WorkloadConfig) -> str:
    return f"{cfg.cpu:g} cpu {cfg.device}" + (f" in {cfg.pool}" if cfg.pool else "")


def plan_safely(planner: Planner, ctx: PlanningContext, memory: Memory
                ) -> tuple[Plan, dict[str, Any]]:
    """What the controller and the preview call: the planner's plan through :func:`guard`."""
    plan, mem = guard(ctx, planner.plan(ctx), memory, planner)
    return exposure.with_exposure(plan, ctx), mem
