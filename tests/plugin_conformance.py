"""The contract every planner and actuator plugin keeps, checked on every registered one.

Like ``tests/kb_conformance.py`` for knowledge bases (and optuna's sampler tests): the suite is
parametrised over what the registries find, built-ins and third parties alike, so a plugin
installed by entry point is checked the moment it is installed. ``toy_plugins`` below is such a
third party: a planner and an actuator in a throw-away distribution on ``sys.path``, found
through its ``entry_points.txt`` exactly as a pip-installed package would be.

Contract (see :class:`planner.planners.base.Planner` and :class:`actuators.base.Actuator`):

* actions come only from the shared step helper (``steps_towards``: every enabled actuator asked
  for the target), so they keep every actuator's bounds, steps and cooldowns;
* the admin's bounds are never exceeded;
* no action while an objective's value is unknown;
* deterministic: the same context (and seed) gives the same plan;
* state in, state out: memory is JSON-safe data, the argument is never mutated, and an instance
  that planned for other intents plans exactly as a fresh one given the same memory.
"""

from __future__ import annotations

import copy
import sys
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

from actuators import registry as actuator_registry
from actuators.base import Actuator
from actuators.topology import observe_all
from knowledge.connect import open_knowledge_base
from planner.domain.memory import plain
from planner.domain.state import WorkloadConfig
from planner.planners import registry as planner_registry
from planner.planners.base import Planner, PlanningContext, steps_towards
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "scenarios" / "multi-tenant.yaml"
"""GPU and CPU pools in two regions: every knob has somewhere to go."""
KNOB_SETS = [("replicas", "cpu", "device", "placement"), ("remove-pod", "weights")]
"""Two admin configurations that together enable every built-in actuator."""

TOY = '''
from planner.domain.plan import Action, Plan
from planner.planners.base import Planner, steps_towards
from actuators.base import Actuator


class KeepPlanner(Planner):
    """Keeps the current configuration; remembers how many cycles it has seen."""

    def plan(self, ctx):
        seen = int(ctx.memory.get("cycles", 0)) + 1
        actions = tuple(steps_towards(ctx, ctx.config))
        return Plan(ctx.intent.key, self.name, ctx.config, ctx.config, actions,
                    reason="toy: keep", memory={"cycles": seen})


class NoteActuator(Actuator):
    """Changes nothing; remembers when it last saw a target."""

    knobs = ()

    def candidates(self, workload, current, limit=10):
        return []

    def steps(self, workload, current, target, now, memory):
        return []

    def apply(self, action, backend):
        return None

    def observe(self, workload, now, memory):
        return {**memory, "seen": now}
'''


def install_toy_plugins() -> Path:
    """A third-party distribution ``toy-plugins`` on ``sys.path`` (module and dist-info)."""
    where = Path(tempfile.mkdtemp(prefix="toy-plugins-"))
    (where / "toy_plugins.py").write_text(textwrap.dedent(TOY))
    info = where / "toy_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[intent_planner.planners]\ntoy-keep = toy_plugins:KeepPlanner\n\n"
        "[intent_planner.actuators]\ntoy-note = toy_plugins:NoteActuator\n")
    sys.path.insert(0, str(where))
    planner_registry.REGISTRY.refresh()
    actuator_registry.REGISTRY.refresh()
    return where


def uninstall_toy_plugins(where: Path) -> None:
    """Undo :func:`install_toy_plugins`."""
    import shutil

    sys.path.remove(str(where))
    sys.modules.pop("toy_plugins", None)
    shutil.rmtree(where, ignore_errors=True)
    planner_registry.REGISTRY.refresh()
    actuator_registry.REGISTRY.refresh()


def contexts(actuators: tuple[str, ...], minutes: float = 6.0) -> list[PlanningContext]:
    """Planning contexts of every intent of the scenario after ``minutes`` of the default
    planner, with ``actuators`` enabled (and their memory as the run left it)."""
    scenario = load_scenario(SCENARIO)
    admin = scenario.spec.admin.model_copy(update={"actuators": actuators})
    run = ScenarioRun(scenario, knowledge=open_knowledge_base(None))
    run.run(minutes * 60.0)
    acts = actuator_registry.create(actuators, admin)
    snap = run.sim.observe()
    observe_all(acts.values(), snap)
    out = []
    for intent in scenario.intents:
        profiles = {o.name: run.source.profiles()[o.profile_key(intent.metadata.namespace)]
                    for o in intent.spec.objectives}
        current = {o.name: run.sim.measure(intent, profiles[o.name])
                   for o in intent.spec.objectives}
        mem = run.controller.memory(intent.key)
        out.append(PlanningContext(intent, profiles, snap.workloads[intent.workload_key], snap,
                                   current, admin, acts, run.knowledge, snap.time, {},
                                   mem.actuators))
    return out


def pressured(ctx: PlanningContext) -> PlanningContext:
    """``ctx`` under three times the load, its pods saturated and every objective missed by
    far: every planner wants to act."""
    wl = ctx.workload
    wl = replace(wl, request_rate=3.0 * (wl.request_rate or 100.0), cpu_utilization=0.99)
    current = {o.name: (10.0 * o.value if ctx.profiles[o.name].spec.minimizes
                        else 0.1 * o.value) for o in ctx.intent.spec.objectives}
    snap = replace(ctx.snapshot, workloads={**ctx.snapshot.workloads, wl.key: wl})
    return replace(ctx, workload=wl, snapshot=snap, current=current)


def within_bounds(ctx: PlanningContext, cfg: WorkloadConfig) -> bool:
    b = ctx.admin.replicas
    return (b.min <= cfg.replicas <= b.max and cfg.cpu in ctx.admin.cpu.sizes
            and cfg.device in ctx.admin.devices
            and (ctx.admin.pools is None or cfg.pool is None or cfg.pool in ctx.admin.pools))


def as_data(value: Any) -> Any:
    return plain(value)


class PlannerConformance:
    """Run against one planner class (``planner_type``) on contexts (``ctx``)."""

    def check(self, planner_type: type[Planner], ctxs: list[PlanningContext]) -> None:
        for ctx in [*ctxs, *map(pressured, ctxs)]:
            self.actions_only_through_the_step_helper(planner_type, ctx)
            self.admin_bounds_never_exceeded(planner_type, ctx)
            self.no_action_on_unknown_kpis(planner_type, ctx)
            self.deterministic(planner_type, ctx)
            self.state_in_state_out(planner_type, ctx, ctxs)

    @staticmethod
    def actions_only_through_the_step_helper(planner_type: type[Planner],
                                             ctx: PlanningContext) -> None:
        plan = planner_type().plan(ctx)
        assert plan.actions == tuple(steps_towards(ctx, plan.target)), (
            f"{planner_type.name}: actions not from steps_towards(ctx, target)")
        assert all(a.actuator in ctx.actuators for a in plan.actions)

    @staticmethod
    def admin_bounds_never_exceeded(planner_type: type[Planner], ctx: PlanningContext) -> None:
        plan = planner_type().plan(ctx)
        assert within_bounds(ctx, plan.target) or plan.target == ctx.config, plan.target

    @staticmethod
    def no_action_on_unknown_kpis(planner_type: type[Planner], ctx: PlanningContext) -> None:
        blind = replace(ctx, current=dict.fromkeys(ctx.current))
        assert planner_type().plan(blind).actions == ()

    @staticmethod
    def deterministic(planner_type: type[Planner], ctx: PlanningContext) -> None:
        a, b = planner_type().plan(ctx), planner_type().plan(ctx)
        da, db = a.as_dict(), b.as_dict()
        da.pop("planning_ms"), db.pop("planning_ms")
        assert da == db and a.memory == b.memory

    @staticmethod
    def state_in_state_out(planner_type: type[Planner], ctx: PlanningContext,
                           others: list[PlanningContext]) -> None:
        first = planner_type().plan(ctx)
        assert as_data(first.memory) == first.memory, "memory must be JSON-safe data"
        given = copy.deepcopy(first.memory)
        ctx2 = replace(ctx, memory=first.memory)
        used = planner_type()
        for other in others:            # an instance that planned for others...
            used.plan(other)
        again = used.plan(ctx2)
        fresh = planner_type().plan(ctx2)   # ...plans as a fresh one: no hidden state
        da, db = again.as_dict(), fresh.as_dict()
        da.pop("planning_ms"), db.pop("planning_ms")
        assert da == db and again.memory == fresh.memory
        assert first.memory == given, "the memory passed in was mutated"


class ActuatorConformance:
    """Run against one actuator class on contexts in which it is enabled."""

    def check(self, name: str, ctxs: list[PlanningContext]) -> None:
        for ctx in ctxs:
            act = ctx.actuators[name]
            mem = ctx.actuator_memory.get(name, {})
            given = copy.deepcopy(dict(mem))
            observed = act.observe(ctx.workload.key, ctx.now, mem)
            assert as_data(observed) == observed, f"{name}: memory must be JSON-safe data"
            for target in self.targets(ctx):
                one = act.steps(ctx.workload.key, ctx.config, target, ctx.now, observed)
                two = act.steps(ctx.workload.key, ctx.config, target, ctx.now, observed)
                assert one == two, f"{name}: steps must be pure"
                twin = type(act)(ctx.admin)       # a fresh instance, given the same memory
                observe_all([twin], ctx.snapshot)
                assert twin.steps(ctx.workload.key, ctx.config, target, ctx.now,
                                  twin.observe(ctx.workload.key, ctx.now, mem)) == one
                for a in one:
                    assert a.actuator == name and a.workload == ctx.workload.key
                    after = act.applied(a, ctx.now, observed)
                    assert as_data(after) == after
                assert len(one) <= ctx.admin.max_actions_per_cycle or name == "weights"
            for cand in act.candidates(ctx.workload, ctx.config):
                assert within_bounds(ctx, act.clip(cand)), cand
            assert dict(mem) == given, f"{name}: the memory passed in was mutated"

    @staticmethod
    def targets(ctx: PlanningContext) -> list[WorkloadConfig]:
        cfg, b = ctx.config, ctx.admin.replicas
        return [cfg, cfg.with_(replicas=b.max), cfg.with_(replicas=b.min),
                cfg.with_(cpu=max(ctx.admin.cpu.sizes)), cfg.with_(device="gpu"),
                cfg.with_(device="cpu", cpu=min(ctx.admin.cpu.sizes))]


def actuator_contexts(name: str, cache: dict[tuple[str, ...], list[PlanningContext]],
                      plugin: type[Actuator]) -> list[PlanningContext]:
    """Contexts in which ``name`` is enabled (a third party's next to the built-in replicas)."""
    knobs = next((k for k in KNOB_SETS if name in k), ("replicas", name))
    if knobs not in cache:
        cache[knobs] = contexts(knobs)
    return cache[knobs]
