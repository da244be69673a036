"""The intent controller: observe -> plan -> act -> record -> report, once per cycle.

Level-based and idempotent: each cycle reads the whole state and recomputes. It does not know
which :class:`planner.domain.ports.ClusterBackend` it drives.

Memory: what the planner and the actuators remember of an intent between cycles is an
:class:`~planner.domain.memory.IntentMemory` the controller keeps, passes in, takes back,
persists in the knowledge base each cycle it changes and reads back the first time it sees an
intent (after a restart, the next plan is the one the uninterrupted controller would make).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from actuators import registry as actuator_registry
from actuators import topology
from actuators import weights as weights_actuator
from actuators.base import Actuator
from knowledge.base import KnowledgeBase
from planner.control import contention
from planner.control.event_detail import PodDetailSampler
from planner.control.outcome import IntentOutcome, Staged
from planner.control.phases import PhaseClock
from planner.domain import use_case
from planner.domain.admin import AdminConfig
from planner.domain.errors import IntentPlannerError, PermanentError, TemporaryError
from planner.domain.events import build_event
from planner.domain.intents import (
    Intent,
    KPIProfile,
    implausible_target,
    objective_met,
    objective_profiles,
)
from planner.domain.memory import IntentMemory
from planner.domain.plan import Plan
from planner.domain.ports import ClusterBackend, IntentSource, KPISource
from planner.domain.state import ClusterSnapshot, WorkloadConfig
from planner.domain.status import build_status
from planner.planners import capacity, safety
from planner.planners import registry as planner_registry
from planner.planners.base import Planner, PlanningContext, without_knobs

log = logging.getLogger(__name__)
RETENTION_EVERY_S = 3600.0


CycleHook = Callable[[ClusterSnapshot, list[IntentOutcome]], None]
Measured = dict[tuple[str, str], "float | None"]
"""One cycle's KPI values by (intent key, objective name)."""


class IntentController:
    def __init__(
        self,
        backend: ClusterBackend,
        kpis: KPISource,
        intents: IntentSource,
        knowledge: KnowledgeBase,
        admin: AdminConfig | None = None,
        planners: Mapping[str, Planner] | None = None,
        actuators: Mapping[str, Actuator] | None = None,
    ) -> None:
        self.backend = backend
        self.kpis = kpis
        self.source = intents
        self.knowledge = knowledge
        self.admin = admin or AdminConfig()
        self.actuators = dict(actuators) if actuators is not None else actuator_registry.create(
            actuator_registry.enabled_names(self.admin), self.admin)
        self._planners: dict[str, Planner] = dict(planners or {})
        self._statuses: dict[str, dict[str, Any]] = {}
        self._stored_statuses: dict[str, dict[str, Any]] = {}
        """The status last stored in the knowledge base per intent: an unchanged one is not
        written again."""
        self.reserved: list[tuple[str, str, Plan]] = []
        """The last cycle's active plans in the order they were made (intent, workload,
        plan): the capacity each reserved for the intents after it."""
        self.placements: dict[str, WorkloadConfig] = {}
        """The shapes the last cycle's joint plan assigned (intent -> shape; empty when the
        intents were planned one after another)."""
        self._memory: dict[str, IntentMemory] = {}
        self._unrestored: dict[str, IntentMemory] = {}
        """Memory built while the stored one could not be read (knowledge base down): used,
        never persisted over the stored one, dropped as soon as that can be read."""
        self.hooks: list[CycleHook] = []
        self.cycles = 0
        self.intents_seen = 0
        """How many intents the last cycle reconciled."""
        self._last_retention = -float("inf")
        self.pod_detail = PodDetailSampler()
        self.clock = PhaseClock()
        self._declared: dict[str, list[Intent]] = {}
        """This cycle's intents with a use case, by workload (:meth:`_use_cases`)."""
        self._use_case_problems: dict[str, str] = {}
        """This cycle's intents whose use case's dispatch policy cannot be used, and why."""
        """The last cycle's CPU time per phase (:mod:`planner.control.phases`)."""

    def planner_for(self, intent: Intent) -> Planner:
        name = self.admin.planner_for(intent.metadata.namespace)
        if name not in self._planners:
            self._planners[name] = planner_registry.create_for(self.admin, name)
        return self._planners[name]

    def memory(self, intent_key: str) -> IntentMemory:
        """The planner's and actuators' memory of an intent (read from the knowledge base the
        first time; empty when there is none). While the knowledge base cannot be read, the
        memory built since is used and the read is tried again every cycle."""
        mem = self._memory.get(intent_key)
        if mem is not None:
            return mem
        found = self.peek_memory(intent_key)
        if found is None:
            return self._unrestored.get(intent_key) or IntentMemory(intent_key)
        self._unrestored.pop(intent_key, None)
        self._memory[intent_key] = found
        return found

    def peek_memory(self, intent_key: str) -> IntentMemory | None:
        """The memory of an intent without keeping anything (for previews): ``None`` when the
        knowledge base cannot be read."""
        mem = self._memory.get(intent_key)
        if mem is not None:
            return mem
        try:
            doc = self.knowledge.memory(intent_key)
        except TemporaryError as exc:
            log.warning("memory of %s not restored (knowledge base unavailable): %s",
                        intent_key, exc)
            return None
        if doc is not None:
            try:
                return IntentMemory.from_document(doc)
            except ValueError as exc:
                log.error("memory of %s not restored: %s", intent_key, exc)
        return IntentMemory(intent_key)

    def _remember(self, mem: IntentMemory) -> None:
        if mem.intent not in self._memory:      # the stored memory could not be read yet
            self._unrestored[mem.intent] = mem
            return
        if self._memory.get(mem.intent) == mem:
            return
        self._memory[mem.intent] = mem
        try:
            self.knowledge.put_memory(mem.intent, mem.as_document())
        except TemporaryError as exc:
            log.warning("knowledge base unavailable, memory of %s not stored: %s",
                        mem.intent, exc)
        except PermanentError as exc:
            log.error("memory of %s refused by the knowledge base: %s", mem.intent, exc)

    def cycle(self) -> list[IntentOutcome]:
        """One pass over every intent; never raises for a failing dependency.

        Every intent is observed first, then planned highest priority first on the room the
        earlier plans left (:mod:`planner.planners.capacity`); when a plan was capped by
        capacity, the competing intents are planned again together
        (:mod:`planner.control.contention`). Then each plan is applied, recorded and
        reported, in the same order."""
        self.clock = clock = PhaseClock()
        with clock.phase("observe"):
            try:
                snapshot = self.backend.observe()
            except TemporaryError as exc:
                log.warning("cluster unreadable, skipping this cycle: %s", exc)
                return []
            topology.observe_all(self.actuators.values(), snapshot)
            profiles = self.source.profiles()
            intents = sorted(self.source.intents(), key=lambda i: -i.spec.priority)
            self.intents_seen = len(intents)
            self._forget({i.key for i in intents})
            self._use_cases(intents)
        with clock.phase("kpis"):
            measured = self._measure_all(intents, snapshot, profiles)
        with clock.phase("observe"):
            staged = [self._observe_isolated(i, snapshot, profiles, measured) for i in intents]
        pending = [s for s in staged if isinstance(s, Staged)]
        with clock.phase("plan"):
            self.placements = {}
            self.reserved = self._plan_in_order(pending, snapshot)
            if contention.capped(pending):
                decision = contention.decide(pending, snapshot, self.context,
                                             self.admin.utility)
                if decision is not None:
                    self.placements = decision.placements
                    self.reserved = self._plan_in_order(pending, snapshot)
                    contention.annotate(pending, decision)
        outcomes = [s if isinstance(s, IntentOutcome) else self._finish_isolated(s)
                    for s in staged]
        with clock.phase("record"):
            self._flush_knowledge()
        with clock.phase("retention"):
            self._retention(snapshot.time)
        self.cycles += 1
        with clock.phase("hooks"):
            for hook in self.hooks:
                try:
                    hook(snapshot, outcomes)
                except Exception:  # a hook must not stop the controller
                    log.exception("cycle hook failed")
        return outcomes

    def _use_cases(self, intents: list[Intent]) -> None:
        """This cycle's use cases: each workload's weight policy to the weights actuator, the
        intents whose dispatch policy cannot be used (reported invalid), and every intent by
        workload for the status's list of a workload's use cases."""
        self._declared = {}
        self._use_case_problems = {}
        policies: dict[str, tuple[str, dict[str, Any]]] = {}
        for intent in intents:                  # highest priority first
            uc = intent.spec.use_case
            if uc is None:
                continue
            self._declared.setdefault(intent.workload_key, []).append(intent)
            if uc.dispatch == "balance":
                continue
            name, params = use_case.dispatch_policy(uc, self.admin)
            problem = weights_actuator.use_case_problem(name, params)
            if problem is not None:
                self._use_case_problems[intent.key] = problem
            # A shadow intent acts on nothing, weights included; of two active intents on one
            # workload, the higher priority's policy weights it.
            elif intent.spec.active and intent.workload_key not in policies:
                policies[intent.workload_key] = (name, params)
        weights_actuator.observe_dispatch(self.actuators.values(), policies)

    def _forget(self, keys: set[str]) -> None:
        """Drop the write-side bookkeeping of intents that no longer exist."""
        self.pod_detail.forget(keys)
        for key in [k for k in self._stored_statuses if k not in keys]:
            del self._stored_statuses[key]

    def _measure_all(self, intents: list[Intent], snapshot: ClusterSnapshot,
                     profiles: Mapping[str, KPIProfile]) -> Measured:
        """The objectives of every intent that will be planned, measured in one call
        (:meth:`KPISource.measure_all`: a network source runs them concurrently within a
        deadline), in the order the intents would measure them one by one. Empty when the
        source fails: each intent then measures its own."""
        requests: list[tuple[Intent, KPIProfile]] = []
        keys: list[tuple[str, str]] = []
        for intent in intents:
            try:
                by_objective, missing = objective_profiles(intent, profiles)
            except Exception:  # reported by _observe_isolated
                continue
            if missing or snapshot.workload(intent.workload_key) is None:
                continue
            for obj in intent.spec.objectives:
                requests.append((intent, by_objective[obj.name]))
                keys.append((intent.key, obj.name))
        if not requests:
            return {}
        try:
            values = self.kpis.measure_all(requests)
        except Exception:  # a KPI source must not raise; if it does, measure one by one
            log.exception("measuring the cycle's KPIs failed; measuring intent by intent")
            return {}
        if len(values) != len(requests):
            log.error("the KPI source answered %d of %d measurements; measuring intent by "
                      "intent", len(values), len(requests))
            return {}
        return dict(zip(keys, values, strict=True))

    def _observe_isolated(self, intent: Intent, snapshot: ClusterSnapshot,
                          profiles: Mapping[str, KPIProfile],
                          measured: Measured | None = None) -> Staged | IntentOutcome:
        """One intent's failure (a plugin's bug, a bad document) never stops the others."""
        try:
            return self._observe_intent(intent, snapshot, profiles, measured or {})
        except Exception as exc:
            return self._failed(intent, snapshot.time, exc)

    def _finish_isolated(self, s: Staged) -> IntentOutcome:
        try:
            return self._finish(s)
        except Exception as exc:
            return self._failed(s.out.intent, s.snapshot.time, exc)

    def _failed(self, intent: Intent, now: float, exc: Exception) -> IntentOutcome:
        log.exception("reconciling %s failed", intent.key)
        out = IntentOutcome(intent, planner_error=f"internal error: {type(exc).__name__}: {exc}")
        self._report(out, now)
        return out

    def _plan_in_order(self, pending: list[Staged], snapshot: ClusterSnapshot
                       ) -> list[tuple[str, str, Plan]]:
        """Plan ``pending`` (highest priority first; the intents a joint plan served before
        the others) each on ``snapshot`` with the room the earlier active plans add reserved;
        the plans in the order they were made."""
        view = snapshot  # the cluster as the next intent sees it: earlier plans' pods reserved
        reserved: list[tuple[str, str, Plan]] = []
        for s in sorted(pending, key=lambda s: s.out.intent.key not in self.placements):
            self._plan(s, view, self.placements.get(s.out.intent.key))
            plan, intent = s.out.plan, s.out.intent
            if plan is not None and intent.spec.active:
                view = capacity.reserve(view, s.workload, plan)
                reserved.append((intent.key, intent.workload_key, plan))
        return reserved

    def _flush_knowledge(self) -> None:
        """Hand the cycle's events, statuses and memories to the knowledge base's writer: one
        batch per collection (``KnowledgeBase.flush``; a writer thread, if the store has one,
        writes them while the next cycle runs)."""
        try:
            self.knowledge.flush(wait=False)
        except TemporaryError as exc:
            log.warning("knowledge base unavailable, the cycle's writes wait: %s", exc)

    def _retention(self, now: float) -> None:
        """Apply the knowledge base's event retention about once an hour."""
        if now - self._last_retention < RETENTION_EVERY_S:
            return
        self._last_retention = now
        try:
            deleted = self.knowledge.apply_retention(now)
        except TemporaryError as exc:
            log.warning("retention not applied: %s", exc)
            return
        if deleted:
            log.info("retention: %d old event(s) deleted", deleted)

    def _observe_intent(self, intent: Intent, snapshot: ClusterSnapshot,
                        profiles: Mapping[str, KPIProfile],
                        measured: Measured) -> Staged | IntentOutcome:
        """Check the intent, measure its objectives and let the actuators observe its
        workload; an invalid intent is reported and finished here."""
        out = IntentOutcome(intent)
        now = snapshot.time
        workload = snapshot.workload(intent.workload_key)
        by_objective, missing = objective_profiles(intent, profiles)
        if missing:
            i, ref = missing[0]
            out.invalid = f"spec.objectives[{i}].measuredBy: no KPIProfile {ref!r}"
        for i, obj in enumerate(intent.spec.objectives):
            bad = None if out.invalid else implausible_target(obj, by_objective[obj.name])
            if bad is not None:  # 99.5 for 0.995: reported, not chased with the cluster
                out.invalid = f"spec.objectives[{i}].value: {bad[0]}; fix: {bad[1]}"
        if out.invalid is None and workload is None:
            out.invalid = (f"spec.targetRef: {intent.spec.target_ref.kind} "
                           f"{intent.workload_key!r} not found")
        if out.invalid is None:
            out.invalid = self._use_case_problems.get(intent.key)
        out.use_case = use_case.use_case_status(
            intent, self._declared.get(intent.workload_key, ()),
            workload.config if workload is not None else None,
            use_case.pin_notes(intent.spec.use_case, self.admin, snapshot.facts.has_gpu))
        if out.invalid is not None or workload is None:
            self._report(out, now)
            return out
        unknown_reasons: dict[str, str] = {}
        for obj in intent.spec.objectives:
            prof = by_objective[obj.name]
            key = (intent.key, obj.name)
            value = measured[key] if key in measured else self.kpis.measure(intent, prof)
            out.current[obj.name] = value
            out.met[obj.name] = objective_met(value, obj, prof)
            if value is None:
                why = getattr(self.kpis, "last_error", None)
                unknown_reasons[obj.name] = (why(intent, prof) if callable(why) else None) or \
                    "no data"
        mem = observed(self.actuators, workload.key, now, self.memory(intent.key), out.errors)
        return Staged(out, snapshot, workload, by_objective, mem, self.planner_for(intent),
                      unknown_reasons)

    def context(self, s: Staged, view: ClusterSnapshot,
                placement: WorkloadConfig | None = None) -> PlanningContext:
        """What the staged intent's planner is given when planned on ``view``."""
        return PlanningContext(s.out.intent, s.profiles, s.workload, view, s.out.current,
                               use_case.planning_admin(self.admin, s.out.intent,
                                                       s.workload.config),
                               without_knobs(self.actuators, use_case.fixed_knobs(s.out.intent)),
                               self.knowledge, s.snapshot.time,
                               s.mem.for_planner(s.planner.name), s.mem.actuators, placement,
                               safety.vetoed_shapes(s.mem.safety, s.snapshot.time))

    def _plan(self, s: Staged, view: ClusterSnapshot,
              placement: WorkloadConfig | None = None) -> None:
        """Plan the staged intent on ``view`` (pure: planning again replaces the result)."""
        out, planner = s.out, s.planner
        ctx = self.context(s, view, placement)
        t0 = time.perf_counter()
        out.planner_error = None
        try:
            plan, s.safety_memory = safety.plan_safely(planner, ctx, s.mem.safety)
        except Exception as exc:  # a planner plugin's failure is this intent's, not the cycle's
            if not isinstance(exc, IntentPlannerError):
                log.exception("planner %s failed on %s", planner.name, out.intent.key)
            out.planner_error = f"planner {planner.name}: {exc}"
            plan = None
        elapsed = (time.perf_counter() - t0) * 1000.0
        out.plan = _with_latency(plan, elapsed) if plan is not None else None

    def _finish(self, s: Staged) -> IntentOutcome:
        """Apply the staged intent's plan, then remember, record and report the cycle."""
        out, mem, plan = s.out, s.mem, s.out.plan
        intent, now = out.intent, s.snapshot.time
        if plan is not None:
            mem = mem.with_planning(s.planner.name, plan.memory, now).with_safety(
                s.safety_memory, now)
        if plan is not None and intent.spec.active:
            with self.clock.phase("act"):
                mem = self._act(plan, out, now, mem)
        with self.clock.phase("record"):
            self._remember(mem)
            self._record(s)
        with self.clock.phase("status"):
            self._report(out, now, s.unknown_reasons)
        return out

    def _record(self, s: Staged) -> None:
        out, now = s.out, s.snapshot.time
        detail = self.pod_detail.wants(out.intent.key, s.workload, now)
        try:
            self.knowledge.record_event(build_event(out.intent, s.workload, s.snapshot,
                                                    out.current, out.plan, bool(out.applied),
                                                    out.applied_actions, detail))
        except TemporaryError as exc:
            log.warning("knowledge base unavailable, event not recorded: %s", exc)
        except PermanentError as exc:
            log.error("event of %s refused by the knowledge base: %s", out.intent.key, exc)

    def _act(self, plan: Plan, out: IntentOutcome, now: float,
             mem: IntentMemory) -> IntentMemory:
        for action in plan.actions:
            act = self.actuators.get(action.actuator)
            if act is None:
                out.errors.append(f"{action.actuator}: actuator not enabled")
                continue
            try:
                act.apply(action, self.backend)
            except TemporaryError as exc:
                out.errors.append(f"{action.actuator}: will retry: {exc}")
                continue
            except PermanentError as exc:
                out.errors.append(f"{action.actuator}: {exc}")
                continue
            name = action.actuator
            mem = mem.with_actuator(name, act.applied(action, now, mem.for_actuator(name)), now)
            mem = mem.with_change(name, now)
            out.applied.append(action.reason or action.actuator)
            out.applied_actions.append(action)
        return mem

    def _report(self, out: IntentOutcome, now: float,
                unknown_reasons: dict[str, str] | None = None) -> None:
        key = out.intent.key
        # After a restart the object's own status keeps transition times and the last plan.
        previous = self._statuses.get(key) or out.intent.status
        mem = self._memory.get(key)
        out.status = build_status(out.intent, previous, now, out.current, out.met,
                                  out.plan, out.applied, out.errors, out.invalid, unknown_reasons,
                                  out.planner_error, mem.changes if mem is not None else None,
                                  out.use_case)
        self._statuses[key] = out.status
        self.source.report(out.intent, out.status)
        if self._stored_statuses.get(key) == out.status:
            return  # stored already: its time says when it last changed
        try:
            self.knowledge.put_status(key, now, out.status)
        except TemporaryError as exc:
            log.warning("knowledge base unavailable, status not stored: %s", exc)
            return
        self._stored_statuses[key] = out.status

    def status(self, intent_key: str) -> dict[str, Any] | None:
        return self._statuses.get(intent_key)

    def view_for(self, intent_key: str, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """``snapshot`` as ``intent_key`` would see it in a cycle: with the room reserved by
        the plans made before it (higher priority) in the last cycle (what a preview plans
        on; see :mod:`planner.planners.capacity`)."""
        view = snapshot
        for key, workload_key, plan in self.reserved:
            if key == intent_key:
                break
            workload = snapshot.workload(workload_key)
            if workload is not None:
                view = capacity.reserve(view, workload, plan)
        return view


def observed(actuators: Mapping[str, Actuator], workload: str, now: float,
             mem: IntentMemory, errors: list[str] | None = None) -> IntentMemory:
    """``mem`` after every actuator took in this cycle's observation of ``workload``
    (:meth:`Actuator.observe`); the controller does this before planning, and so does a
    preview. An actuator that fails keeps its memory; its error goes to ``errors`` (an
    actuator's failure, not the planner's)."""
    for name, act in actuators.items():
        try:
            seen = act.observe(workload, now, mem.for_actuator(name))
        except Exception as exc:  # a plugin's bug must not stop planning
            log.exception("actuator %s failed to observe %s", name, workload)
            if errors is not None:
                errors.append(f"{name}: observe failed: {type(exc).__name__}: {exc}")
            continue
        if seen != mem.for_actuator(name):
            mem = mem.with_actuator(name, seen, now)
    return mem


def _with_latency(plan: Plan, ms: float) -> Plan:
    from dataclasses import replace

    return replace(plan, planning_ms=ms)
