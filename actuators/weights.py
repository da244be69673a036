"""The ``weights`` actuator: per-pod dispatch weights from live metrics, as part of a plan.

Each cycle, :meth:`WeightsActuator.observe` turns the pods of a workload in the cycle's
:class:`~planner.domain.state.ClusterSnapshot` into :class:`~actuators.dispatch.EndpointMetrics`
(ready, CPU utilisation, the pod's share of the request rate) and feeds them to the workload's
:class:`~actuators.dispatch.WeightEngine`; every guard (blackout, expiry, malformed data, minimum
share, change limits, hysteresis) is the engine's. :meth:`WeightsActuator.steps` returns one
action when the weights the engine wants differ from what a sink holds: a change past the
engine's threshold, a new or no-longer-ready pod, or a write that failed and is retried.
:meth:`WeightsActuator.apply` gives the weights to the backend
(:meth:`~planner.domain.ports.ClusterBackend.set_weights`; the simulator dispatches by them) and to
every configured data plane (HAProxy runtime API, Envoy EDS file, ConfigMap; see
:mod:`actuators.dispatch.sinks`). A failing data plane never raises: it is logged, and retried
in the next cycle with the failure named in that action's reason.

**Memory.** The actuator keeps nothing between cycles: the engine, what each sink holds and why
a write failed are the intent's memory of this actuator (:mod:`planner.domain.memory`), a
JSON-safe mapping the controller persists every cycle (:class:`WeightsMemory`)::

    workload     the workload the rest is about (another one starts afresh)
    at           when the engine last took in samples (observing twice at one time is a no-op)
    engine       WeightEngine.state(): per pod {ready, weight, since, problem, sample} (the
                 last valid sample: timestamp, cpu_util, request_rate, pool) and the policy's
                 state (slo: a smoothed service rate per pod; lvs: a feedback weight per pod;
                 squeeze: service rates, the pods in use, latency caps)
    decisions    per pod whose weight differs from what the first sink holds: the last
                 update's status and reason (the action's reason and ``changes``)
    delivered    per sink (backend, haproxy, envoy, configmap): the weights it holds
    failures     per sink: why its last write failed (absent once a write succeeds)
    no_backend   true once the backend refused dispatch weights (data planes only from then)

A few numbers per pod and sink; no sample history. The engine is rebuilt from ``engine`` in every
:meth:`~WeightsActuator.observe` and written down again after its update.

**Apply outcomes.** :meth:`~WeightsActuator.apply` writes the sinks the action names (those that
lag) and hands its per-sink outcome (:class:`~actuators.dispatch.sinks.Delivery`) to
:meth:`~WeightsActuator.applied`, which the controller calls right after a successful apply and
which records it in the memory: what each sink now holds, the failures. Nothing else is kept:
the hand-off is this call's output, like ``held`` is :meth:`steps`'s, and it is dropped when
``applied`` takes it or the next ``apply`` starts; ``applied`` without it (another caller)
records every sink the action names as holding its weights. A sink whose write failed still lags
in the memory, so the next cycle's action re-sends to it (writes are idempotent) and names the
failure. A backend's :class:`~planner.domain.errors.TemporaryError` is raised after every data
plane was written (the controller reports it and does not call ``applied``: the next cycle
re-sends to every lagging sink).

**One engine per workload.** Every data plane is rendered from the same weights, so they never
disagree. A workload's pods form one load-balancing group, and the policies normalise within the
group they are given (the ``slo`` policy water-fills one group's load over its pods; the mean
weight a new pod gets is its group's mean).

**Per-pod metrics.** The snapshot carries each pod's CPU utilisation (over the metrics window)
and the workload's request rate. A pod's request rate is the workload's rate times the pod's
traffic share under the weights the first sink holds (:func:`traffic_shares`, the same rule the
simulator dispatches by). Latency and in-flight counts per pod are not in the snapshot and are
left unmeasured. Every sample carries the pod's node pool (``PodState.pool``; the ``manual``
policy's rules by pool). A ready pod without a utilisation gets an empty sample, which the
measuring built-in policies reject as incomplete (``slo`` without a predictor, ``orca``,
``lvs`` and ``squeeze`` all need a rate or a load metric; ``manual`` needs none): the pod
keeps its last weight until its last valid data expires, or gets the mean weight if it never
had any. A malformed value (NaN, negative, above 1) is passed on and
rejected by the engine's checks, with the same effect.

**A canary's pods** (:attr:`~planner.domain.state.WorkloadState.canary`: a second Deployment
behind the same Service) are endpoints of the same load balancer but not of the engine: their
speed is what the trial measures, so their weight comes from the trial's size, not from their
metrics (:func:`with_canary`). :meth:`WeightsActuator.steps` gives every data plane the whole
set, canary pods included, and returns an action when a canary's weight changes too. While a
canary pod is below 5 % busy (:data:`CANARY_MEASURABLE`) its share is doubled each cycle, up to
the share ``canary.fraction`` of the workload's replicas would carry (the workload's weights
scaled down together where the largest weight, ``dispatch.engine.maxWeight``, is not enough);
without that, one GPU pod beside two hundred CPU pods gets half a percent of the load, and a
device many times as fast sits too idle for its speed to be read. The canary pods must be
servers of the same load-balancing group (for HAProxy, of the same backend), as they are behind
the same Service. Changes of the workload's weights made for the canary are named as such in
the action. The Service's request rate is split over the workload's and the canary's ready pods
when the per-pod rates are worked out (:meth:`WeightsActuator.observe`).

Not built: a step waits for nothing but the next cycle (a metrics window longer than the cycle
reads the share before the last step); the canary's step and largest share are not admin
settings of their own (Flagger's ``stepWeight`` and ``maxWeight``). A known cost: while the
workload's weights are scaled down, the engine keeps a decision for every pod in the memory
(each differs from what the data plane holds).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actuators import dispatch as pw
from actuators.base import Actuator
from actuators.dataplanes import DataPlaneWriter
from actuators.dataplanes import configmap as configmap_plane
from actuators.dispatch.memory import WeightsMemory
from actuators.dispatch.sinks import BACKEND, Delivery, Sinks
from actuators.topology import ClusterAware
from planner.domain import admin as admin_config
from planner.domain.errors import SpecError
from planner.domain.memory import EMPTY, Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState

__all__ = ["BACKEND", "WeightsActuator", "WeightsMemory", "endpoint_metrics",
           "engine_config", "traffic_shares", "with_canary"]

log = logging.getLogger(__name__)

MAX_CHANGES_IN_REASON = 4

PolicyFactory = Callable[[], pw.WeightPolicy]


def traffic_shares(ready: list[str], weights: Mapping[str, int]) -> dict[str, float]:
    """The share of arrivals each ready pod gets from a load balancer holding ``weights``.

    A ready pod without a positive weight gets the mean of the positive weights (the engine's
    rule for new endpoints); no weights at all: equal shares. The simulator dispatches by the
    same rule (:func:`simulator.cluster.dispatch_shares`).
    """
    if not ready:
        return {}
    given = {p: weights.get(p, 0) for p in ready}
    positive = [float(v) for v in given.values() if v > 0]
    if not positive:
        return {p: 1.0 / len(ready) for p in ready}
    mean = sum(positive) / len(positive)
    raw = {p: float(v) if v > 0 else mean for p, v in given.items()}
    total = sum(raw.values())
    return {p: v / total for p, v in raw.items()}


def serving(pod: PodState) -> bool:
    """Whether ``pod`` is a load balancer's endpoint: ready and on a node."""
    return bool(pod.ready and pod.node is not None)


def endpoint_metrics(pod: PodState, request_rate: float | None, share: float | None,
                     now: float) -> pw.EndpointMetrics:
    """One engine sample for ``pod`` (see the module docstring)."""
    ready = serving(pod)
    util, gpu = pod.cpu_utilization, pod.gpu_utilization
    if not ready or (util is None and gpu is None):
        return pw.EndpointMetrics(pod.name, now, ready=ready, pool=pod.pool)
    rate = request_rate * share if request_rate is not None and share is not None else None
    return pw.EndpointMetrics(pod.name, now, ready=True, cpu_util=util, gpu_util=gpu,
                              request_rate=rate, pool=pod.pool)


CANARY_MEASURABLE = 0.05
"""Utilisation below which a canary pod's share of the load grows (:func:`with_canary`): below
5 % busy, its capacity (request rate over utilisation) is read from too small a utilisation to
trust. The planner's verdict counts a pod less than a tenth of this busy as that busy
(``planner.planners.canary.MIN_UTILIZATION``), so its speed is then only a lower bound."""


def with_canary(workload: WorkloadState, weights: Mapping[str, int], fraction: float,
                max_weight: int, held: Mapping[str, int] | None = None,
                resolution: int = 20) -> dict[str, int]:
    """``weights`` (the engine's, for the workload's own pods) with a weight for every pod of
    the workload's canary (a second Deployment behind the same Service), so every data plane
    is given the whole set: 0 for a canary pod that is not ready, and for the ready ones a
    multiple of the workload's mean weight.

    The multiple is the canary's share of the load against a pod of the workload's. It starts
    at 1 (a new endpoint's) and, from the multiple the data plane holds (``held``: the weights
    the first sink was last given), doubles at each call while every ready canary pod is less
    than :data:`CANARY_MEASURABLE` busy and served requests (when its rate is known), up to
    the share ``ceil(fraction x replicas)`` pods would carry (so the first write is already
    twice a new endpoint's share); it is held while a pod is busier or reports no
    utilisation, and a canary pod that becomes ready gets its siblings' weight. So a canary of
    fewer pods than the fraction (a costly device: one GPU pod where the fraction is twenty
    CPU pods) is not judged from a share too small to measure, and one that is slower than
    hoped is not loaded further (the canary is stopped on the first violation).
    Where no ready pod of the workload has a positive weight (all new endpoints), the ready
    canary pods are left out too: every ready pod then gets an equal share.

    While the multiple is above 1, a ready pod of the workload at 0 (a new endpoint) is given
    the mean of the positive weights, its share without the canary (a load balancer's mean
    would count the canary's weight). Where a canary weight would pass ``max_weight``, the
    workload's weights are scaled down together (each at least 1), but not below a mean of
    ``resolution`` (the engine's smallest change that matters as a weight), and the canary's
    weights are capped at ``max_weight``: its share is then smaller than the fraction's."""
    out = dict(weights)
    canary = workload.canary
    if canary is None:
        return out
    mine = [p for p in canary.pods if serving(p)]
    out.update({p.name: 0 for p in canary.pods if not serving(p)})
    ready = [p.name for p in workload.pods if serving(p)]
    positive = [w for p in ready if (w := out.get(p, 0)) > 0]
    if not mine or not positive:
        return out
    mean = sum(positive) / len(positive)
    held = held or {}
    held_mine = [w for p in mine if (w := held.get(p.name, 0)) > 0]
    held_theirs = [w for p in ready if (w := held.get(p, 0)) > 0]
    now = (max(held_mine) / (sum(held_theirs) / len(held_theirs))
           if held_mine and held_theirs else 1.0)
    utils = [p.cpu_utilization for p in mine]
    idle = (all(u is not None and u < CANARY_MEASURABLE for u in utils)
            and all(p.request_rate is None or p.request_rate > 0 for p in mine))
    most = max(1, math.ceil(fraction * workload.config.replicas)) / len(mine)
    times = max(1.0, min(most, 2.0 * now if idle else now))
    if times <= 1.0:
        out.update(dict.fromkeys((p.name for p in mine), max(1, round(mean))))
        return out
    for p in ready:
        if out.get(p, 0) <= 0:
            out[p] = max(1, round(mean))
    each = times * mean
    if each > max_weight:
        scale = max(max_weight / each, min(1.0, resolution / mean))
        out = {p: max(1, round(w * scale)) if w > 0 else w for p, w in out.items()}
        each = min(max_weight, times * sum(out[p] for p in ready) / len(ready))
    out.update(dict.fromkeys((p.name for p in mine), max(1, round(each))))
    return out


def engine_config(e: admin_config.EngineSettings) -> pw.EngineConfig:
    """The engine's guards from the admin's ``dispatch.engine`` settings."""
    return pw.EngineConfig(e.blackout_s, e.expiry_s, e.min_share, e.max_relative_change,
                           e.change_threshold, e.reference_weight, e.min_weight, e.max_weight)


def use_case_problem(policy: str, params: Mapping[str, Any]) -> str | None:
    """Why an intent's ``spec.useCase`` dispatch policy cannot be used (``None``: it can): an
    unregistered name, or parameters the policy refuses."""
    if policy not in pw.REGISTRY.available():
        return (f"spec.useCase.dispatch: no weight policy {policy!r} is installed; fix: use one "
                f"of balance, {', '.join(sorted(pw.REGISTRY.available()))}")
    try:
        pw.create_policy(policy, **params)
    except (TypeError, ValueError) as exc:
        return (f"spec.useCase.dispatchParams: {exc}; fix: give parameters the {policy} policy "
                "accepts (docs/use-cases.md)")
    return None


def observe_dispatch(actuators: Iterable[object],
                     policies: Mapping[str, tuple[str, Mapping[str, Any]]]) -> None:
    """Give every weights actuator this cycle's weight policy per workload (from the intents'
    use cases, :func:`planner.domain.use_case.dispatch_policy`)."""
    for act in actuators:
        if isinstance(act, WeightsActuator):
            act.observe_policies(policies)


def _check_policy(d: admin_config.DispatchConfig) -> None:
    """The admin's policy must be a registered one (or an alias: ``balance``) that accepts its
    ``policyParams``."""
    pw.REGISTRY.get(pw.resolve_name(d.policy), "dispatch.policy")
    try:
        pw.create_policy(d.policy, **d.policy_params)
    except (TypeError, ValueError) as exc:
        raise SpecError("", "dispatch.policyParams", f"{exc}",
                        f"give parameters the {d.policy} policy accepts") from None


class WeightsActuator(ClusterAware, Actuator):
    """Per-pod dispatch weights (knob ``weights``, which no :class:`WorkloadConfig` field has:
    it is not a search dimension, so :meth:`candidates` is empty and every planner gets the
    weights through :func:`planner.planners.base.steps_towards`).

    Configured by ``admin.dispatch`` (:class:`planner.domain.admin.DispatchConfig`); the defaults
    (policy ``slo``, backend only) need no configuration. ``policy`` overrides the policy
    factory (e.g. an ``slo`` policy with a learned latency predictor); ``configmap_apply`` is the
    function that applies a ConfigMap manifest (the Kubernetes wiring passes it, or calls
    :meth:`attach_configmap`); without it a ``configmap`` section is ignored with a warning.
    """

    name = "weights"
    knobs = ("weights",)

    def __init__(self, admin: admin_config.AdminConfig, snapshot: ClusterSnapshot | None = None, *,
                 policy: PolicyFactory | None = None,
                 configmap_apply: configmap_plane.ApplyFn | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        Actuator.__init__(self, admin)
        ClusterAware.__init__(self, snapshot)
        self.dispatch = admin.dispatch
        if policy is None:
            _check_policy(admin.dispatch)
        self._policy_factory = policy
        self.sinks = Sinks(admin.dispatch, configmap_apply, sleep)
        self._delivery: tuple[Action, Delivery] | None = None
        """:meth:`apply`'s outcome, for :meth:`applied` right after (see the module docstring)."""
        self._policies: dict[str, tuple[str, dict[str, Any]]] = {}
        """This cycle's policy per workload whose intent names one (input, like the snapshot:
        :meth:`observe_policies`); the others use the admin's."""

    def observe_policies(self, policies: Mapping[str, tuple[str, Mapping[str, Any]]]) -> None:
        """This cycle's weight policy (name, parameters) per workload whose intent's use case
        names one (``squeeze``, ``manual``); a workload not named uses the admin's
        ``dispatch.policy`` (``balance``)."""
        self._policies = {k: (name, dict(params)) for k, (name, params) in policies.items()}

    def policy_name(self, workload: str | None = None) -> str:
        """The name of the policy that weights ``workload``."""
        named = self._policies.get(workload) if workload is not None else None
        return named[0] if named is not None else self.dispatch.policy

    def engine(self, memory: Memory = EMPTY, workload: str | None = None) -> pw.WeightEngine:
        """An engine in the state ``memory`` (this actuator's memory of an intent) holds, with
        ``workload``'s policy (:meth:`observe_policies`; the admin's when none is named).
        Restored state of another policy is dropped by the engine (only the guards' part is
        kept)."""
        named = self._policies.get(workload) if workload is not None else None
        if named is not None:
            policy = pw.create_policy(named[0], **named[1])
        else:
            policy = (self._policy_factory() if self._policy_factory is not None
                      else pw.create_policy(self.dispatch.policy, **self.dispatch.policy_params))
        eng = pw.WeightEngine(policy, engine_config(self.dispatch.engine))
        state = memory.get("engine")
        if isinstance(state, Mapping) and state:
            eng.restore(state)
        return eng

    # ------------------------------------------------------------------ Actuator
    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        return []

    def observe(self, workload: str, now: float, memory: Memory) -> Memory:
        """Ingest this cycle's samples of ``workload``: the memory after the engine's update
        (unchanged when there is no snapshot of the workload or it was observed at ``now``)."""
        ws = self.workload_state(workload) if self.dispatch.applies_to(workload) else None
        if ws is None:
            return memory
        mem = self._memory(workload, memory)
        if mem.at == now:
            return memory
        try:
            eng = self.engine(mem.as_memory(), workload)
        except ValueError as exc:
            log.error("weights memory of %s: engine state not restored (%s): starting afresh",
                      workload, exc)
            eng = self.engine(workload=workload)
        present = {p.name for p in ws.pods}
        for gone in set(eng.weights) - present:
            eng.forget(gone)
        canary = {p.name for p in ws.canary.pods} if ws.canary is not None else set()
        delivered = {s: {p: w for p, w in held.items() if p in present or p in canary}
                     for s, held in mem.delivered.items()}
        sinks = self.sinks.names(workload, not mem.no_backend)
        before = delivered.get(sinks[0], {}) if sinks else {}
        ready = [p.name for p in ws.pods if serving(p)]
        # The Service's rate is split over the canary's ready pods too.
        trial = [p.name for p in ws.canary.pods if serving(p)] if ws.canary is not None else []
        shares = traffic_shares(ready + trial, before)
        rate = ws.request_rate if ws.request_rate is None or math.isfinite(ws.request_rate) \
            else None
        update = eng.update([endpoint_metrics(p, rate, shares.get(p.name), now)
                             for p in ws.pods], now)
        decisions = {p.name: {"status": d.status.value, "reason": d.reason}
                     for p in ws.pods if (d := update.decisions.get(p.name)) is not None
                     and before.get(p.name) != d.weight}
        return WeightsMemory(workload, float(now), eng.state(), decisions, delivered,
                             mem.failures, mem.no_backend).as_memory()

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        if not self.dispatch.applies_to(workload):
            return []
        ws = self.workload_state(workload)
        if ws is None:
            self.held[workload] = "weights: no cluster snapshot with this workload's pods"
            return []
        self.held.pop(workload, None)
        mem = self._memory(workload, self.observe(workload, now, memory))
        held_by_engine = mem.weights()
        desired = {p.name: held_by_engine.get(p.name, 0) for p in ws.pods}
        sinks = self.sinks.names(workload, not mem.no_backend)
        engine = self.dispatch.engine
        desired = with_canary(ws, desired, self.admin.canary.fraction, engine.max_weight,
                              mem.delivered.get(sinks[0], {}) if sinks else {},
                              math.ceil(1.0 / engine.change_threshold)
                              if engine.change_threshold > 0 else engine.reference_weight)
        trial = {p.name for p in ws.canary.pods} if ws.canary is not None else set()
        lagging = [s for s in sinks
                   if any(mem.delivered.get(s, {}).get(p) != v for p, v in desired.items())]
        if not desired or not lagging:
            return []
        before = mem.delivered.get(sinks[0], {})
        changes = []
        for pod, weight in desired.items():
            if before.get(pod) == weight:
                continue
            d: Mapping[str, str]
            if pod in trial:
                d = {"status": "canary", "reason": "a canary pod, at most the share of "
                     f"{self.admin.canary.fraction:g} of the workload's replicas"}
            elif held_by_engine.get(pod, 0) <= 0 and weight > 0:
                d = {"status": "canary", "reason": "a new endpoint's mean, given explicitly "
                     "beside a canary's weight"}
            elif weight != held_by_engine.get(pod, 0):
                d = {"status": "canary", "reason": f"the engine's {held_by_engine.get(pod, 0)}"
                     ", scaled down with the others to give the canary its share"}
            else:
                d = mem.decisions.get(pod, {})
            changes.append({"pod": pod, "from": before.get(pod), "to": weight,
                            "status": d.get("status", "unknown"),
                            "reason": d.get("reason", "no decision")})
        retry = {s: mem.failures[s] for s in lagging if s in mem.failures}
        policy = mem.policy or self.policy_name(workload)
        parts = [f"{c['pod']} {'-' if c['from'] is None else c['from']}->{c['to']}"
                 for c in changes[:MAX_CHANGES_IN_REASON]]
        if len(changes) > MAX_CHANGES_IN_REASON:
            parts.append(f"+{len(changes) - MAX_CHANGES_IN_REASON} more")
        reason = f"dispatch weights (policy {policy}): " + (", ".join(parts) or "unchanged")
        if retry:
            reason += "; retrying " + ", ".join(f"{s} ({m})" for s, m in sorted(retry.items()))
        params: dict[str, Any] = {"weights": desired, "changes": changes, "policy": policy,
                                  "sinks": lagging}
        if retry:
            params["retry"] = retry
        return [Action(self.name, workload, params, reason)]

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        """Write the action's weights to the sinks it names (every sink if it names none) and
        hand the outcome to :meth:`applied`. A data plane never raises; a backend that has no
        dispatch weights is fine when a data plane is configured, and an
        :class:`~planner.domain.ports.UnsupportedOperation` otherwise."""
        self._delivery = None
        weights = _weights(action)
        targets = action.params.get("sinks") or self.sinks.names(action.workload)
        delivery = self.sinks.write(action.workload, weights, backend, list(targets))
        self._delivery = (action, delivery)

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        """The memory after ``action`` was applied: what each sink now holds, why a write
        failed (see the module docstring)."""
        handed, self._delivery = self._delivery, None
        if handed is not None and handed[0] is action:
            delivery = handed[1]
        else:
            targets = action.params.get("sinks") or self.sinks.names(action.workload)
            delivery = Delivery.everywhere(list(targets), _weights(action))
        return self._memory(action.workload, memory).delivered_to(delivery).as_memory()

    # ------------------------------------------------------------------ data planes
    def attach_configmap(self, apply: configmap_plane.ApplyFn) -> None:
        """Use ``apply`` to apply ConfigMap manifests (enables a ``configmap`` section)."""
        self.sinks.attach_configmap(apply)

    def writers(self, workload: str) -> list[DataPlaneWriter]:
        """The data-plane writers of one workload, from ``admin.dispatch`` (cached)."""
        return self.sinks.writers(workload)

    # ------------------------------------------------------------------ memory
    @staticmethod
    def _memory(workload: str, memory: Memory) -> WeightsMemory:
        """``memory`` read for ``workload`` (malformed: logged, and a fresh start)."""
        try:
            return WeightsMemory.of(memory, workload)
        except ValueError as exc:
            log.error("weights memory of %s is malformed (%s): starting afresh", workload, exc)
            return WeightsMemory(workload)


def _weights(action: Action) -> dict[str, int]:
    return {str(k): int(v) for k, v in dict(action.params.get("weights", {})).items()}
