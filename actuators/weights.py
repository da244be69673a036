"""The ``weights`` actuator: per-pod dispatch weights from live metrics, as part of a plan.

Each cycle, :meth:`WeightsActuator.steps` turns the pods of a workload in the cycle's
:class:`~planner.domain.state.ClusterSnapshot` into :class:`~actuators.dispatch.EndpointMetrics`
(ready,
CPU utilisation, the pod's share of the request rate) and feeds them to the workload's
:class:`~actuators.dispatch.WeightEngine`; every guard (blackout, expiry, malformed data, minimum
share, change limits, hysteresis) is the engine's. It returns one action when the weights the
engine wants differ from what the load balancers last received: a change past the engine's
threshold, a new or no-longer-ready pod, or a write that failed and is retried.
:meth:`WeightsActuator.apply` gives the weights to the backend
(:meth:`~planner.domain.ports.ClusterBackend.set_weights`; the simulator dispatches by them) and to
every configured data plane (HAProxy runtime API, Envoy EDS file, ConfigMap). A failing data
plane is logged and retried in a later cycle; it never raises.

**One view, one engine per workload.** The actuator is the single view of all weights
(:attr:`WeightsActuator.view`, keyed ``namespace/name/pod``) from which every data plane is
rendered, so they never disagree. Inside it each workload has its own engine: a workload's pods
form one load-balancing group, and the policies normalise within the group they are given (the
``slo`` policy water-fills one group's load over its pods; the mean weight a new pod gets is its
group's mean). One engine over all workloads would pool unrelated groups.

**Per-pod metrics.** The snapshot carries each pod's CPU utilisation (over the metrics window)
and the workload's request rate. A pod's request rate is the workload's rate times the pod's
traffic share under the weights last delivered (:func:`traffic_shares`, the same rule the
simulator dispatches by). Latency and in-flight counts per pod are not in the snapshot and are
left unmeasured. A ready pod without a utilisation gets an empty sample, which the built-in
policies reject as incomplete (``slo`` without a predictor, ``orca`` and ``lvs`` all need a
rate or a load metric): the pod keeps its last weight until its last valid data expires, or gets
the mean weight if it never had any. A malformed value (NaN, negative, above 1) is passed on and
rejected by the engine's checks, with the same effect.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from actuators import dataplanes
from actuators import dispatch as pw
from actuators.base import Actuator
from actuators.dataplanes import configmap as configmap_plane
from actuators.dataplanes import envoy as envoy_plane
from actuators.dataplanes import haproxy as haproxy_plane
from actuators.topology import ClusterAware
from planner.domain import admin as admin_config
from planner.domain.errors import SpecError, TemporaryError
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend, UnsupportedOperation
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState

log = logging.getLogger(__name__)

BACKEND = "backend"
"""Name of the cluster backend among the sinks the weights are delivered to."""
MAX_CHANGES_IN_REASON = 4
_TEMPORARY_PREFIXES = ("unreachable", "write failed", "apply failed")

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


def endpoint_metrics(pod: PodState, request_rate: float | None, share: float | None,
                     now: float) -> pw.EndpointMetrics:
    """One engine sample for ``pod`` (see the module docstring)."""
    ready = bool(pod.ready and pod.node is not None)
    util = pod.cpu_utilization
    if not ready or util is None:
        return pw.EndpointMetrics(pod.name, now, ready=ready)
    rate = request_rate * share if request_rate is not None and share is not None else None
    return pw.EndpointMetrics(pod.name, now, ready=True, cpu_util=util, request_rate=rate)


def engine_config(e: admin_config.EngineSettings) -> pw.EngineConfig:
    """The engine's guards from the admin's ``dispatch.engine`` settings."""
    return pw.EngineConfig(e.blackout_s, e.expiry_s, e.min_share, e.max_relative_change,
                           e.change_threshold, e.reference_weight, e.min_weight, e.max_weight)


def _check_policy(d: admin_config.DispatchConfig) -> None:
    """The admin's policy must be a registered one that accepts its ``policyParams``."""
    pw.REGISTRY.get(d.policy, "dispatch.policy")
    try:
        pw.create_policy(d.policy, **d.policy_params)
    except (TypeError, ValueError) as exc:
        raise SpecError("", "dispatch.policyParams", f"{exc}",
                        f"give parameters the {d.policy} policy accepts") from None


def _split(workload: str) -> tuple[str, str]:
    namespace, _, name = workload.partition("/")
    return namespace, name


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
        self.configmap_apply = configmap_apply
        self._sleep = sleep
        self.engines: dict[str, pw.WeightEngine] = {}
        self.delivered: dict[str, dict[str, dict[str, int]]] = {}
        """Per workload and sink (``backend``, ``haproxy``, ...): the weights it holds."""
        self.failures: dict[str, dict[str, str]] = {}
        """Per workload and sink: why the last write failed (cleared by a success)."""
        self.last_update: dict[str, pw.WeightUpdate] = {}
        self._updated_at: dict[str, float] = {}
        self._writers: dict[str, list[dataplanes.DataPlaneWriter]] = {}
        self._backend_unsupported = False
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ the view
    def engine(self, workload: str) -> pw.WeightEngine:
        """The engine of one workload's load-balancing group (created on first use)."""
        eng = self.engines.get(workload)
        if eng is None:
            policy = (self._policy_factory() if self._policy_factory is not None
                      else pw.create_policy(self.dispatch.policy, **self.dispatch.policy_params))
            eng = pw.WeightEngine(policy, engine_config(self.dispatch.engine))
            self.engines[workload] = eng
        return eng

    @property
    def view(self) -> dict[str, int]:
        """Every weight the engines hold, keyed ``namespace/name/pod`` (0: not ready)."""
        return {f"{w}/{pod}": v for w, eng in sorted(self.engines.items())
                for pod, v in sorted(eng.weights.items())}

    # ------------------------------------------------------------------ Actuator
    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        return []

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        if not self.dispatch.applies_to(workload):
            return []
        ws = self.workload_state(workload)
        if ws is None:
            self.held[workload] = "weights: no cluster snapshot with this workload's pods"
            return []
        self.held.pop(workload, None)
        update = self._update(workload, ws, now)
        desired = {p.name: int(update.weights.get(p.name, 0)) for p in ws.pods}
        if not desired:
            return []
        delivered = self.delivered.get(workload, {})
        sinks = self._sinks(workload)
        lagging = [s for s in sinks
                   if any(delivered.get(s, {}).get(p) != v for p, v in desired.items())]
        if not lagging:
            return []
        before = delivered.get(sinks[0], {})
        changes = []
        for pod, weight in desired.items():
            if before.get(pod) == weight:
                continue
            d = update.decisions.get(pod)
            changes.append({"pod": pod, "from": before.get(pod), "to": weight,
                            "status": d.status.value if d is not None else "unknown",
                            "reason": d.reason if d is not None else "no decision"})
        failures = self.failures.get(workload, {})
        retry = {s: failures[s] for s in lagging if s in failures}
        policy = self.engine(workload).policy.name
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
        """Backend first, then every data plane. A data plane never raises (logged, retried
        in a later cycle); a backend that has no dispatch weights is fine when a data plane is
        configured, and a :class:`UnsupportedOperation` otherwise."""
        workload = action.workload
        weights = {str(k): int(v) for k, v in dict(action.params.get("weights", {})).items()}
        writers = self.writers(workload)
        delivered = self.delivered.setdefault(workload, {})
        failures = self.failures.setdefault(workload, {})
        pending: TemporaryError | None = None
        if not self._backend_unsupported:
            try:
                backend.set_weights(workload, dict(weights))
            except UnsupportedOperation as exc:
                if not writers:
                    raise UnsupportedOperation(
                        f"{exc}; configure a data plane in admin.dispatch (haproxy, envoy or "
                        "configmap) or disable the weights actuator") from None
                self._backend_unsupported = True
                log.info("backend %s has no dispatch weights; writing data planes only",
                         backend.name)
            except TemporaryError as exc:
                failures[BACKEND] = str(exc)
                pending = exc
            else:
                delivered[BACKEND] = dict(weights)
                failures.pop(BACKEND, None)
        for writer in writers:
            self._write(workload, writer, weights, delivered, failures)
        if pending is not None:
            raise pending

    # ------------------------------------------------------------------ data planes
    def attach_configmap(self, apply: configmap_plane.ApplyFn) -> None:
        """Use ``apply`` to apply ConfigMap manifests (enables a ``configmap`` section)."""
        self.configmap_apply = apply
        self._writers.clear()

    def writers(self, workload: str) -> list[dataplanes.DataPlaneWriter]:
        """The data-plane writers of one workload, from ``admin.dispatch`` (cached)."""
        cached = self._writers.get(workload)
        if cached is not None:
            return cached
        ns, name = _split(workload)
        d = self.dispatch
        out: list[dataplanes.DataPlaneWriter] = []
        sleep_kw: dict[str, Any] = {"sleep": self._sleep} if self._sleep is not None else {}
        if d.haproxy is not None:
            h = d.haproxy
            backend = dataplanes.render_template(h.backend, ns, name)
            try:
                out.append(haproxy_plane.HAProxyWriter(
                    backend, h.parsed_address(), timeout=h.timeout_s,
                    max_attempts=h.max_attempts, **sleep_kw))
            except ValueError as exc:
                self._warn_once(f"haproxy:{workload}", "haproxy writer for %s disabled: %s",
                                workload, exc)
        if d.envoy is not None:
            e = d.envoy
            out.append(envoy_plane.EnvoyEdsWriter(
                dataplanes.render_template(e.cluster, ns, name),
                dataplanes.render_template(e.path, ns, name),
                max_attempts=e.max_attempts, **sleep_kw))
        if d.configmap is not None:
            c = d.configmap
            if self.configmap_apply is None:
                self._warn_once("configmap", "admin.dispatch.configmap is set but no ConfigMap "
                                "apply function is attached: ConfigMap output disabled")
            else:
                out.append(configmap_plane.ConfigMapWriter(
                    dataplanes.render_template(c.name, ns, name),
                    dataplanes.render_template(c.namespace, ns, name),
                    self.configmap_apply, key=c.key, **sleep_kw))
        self._writers[workload] = out
        return out

    def _write(self, workload: str, writer: dataplanes.DataPlaneWriter,
               weights: dict[str, int], delivered: dict[str, dict[str, int]],
               failures: dict[str, str]) -> None:
        ns, name = _split(workload)
        sink = writer.target
        if isinstance(writer, haproxy_plane.HAProxyWriter) and self.dispatch.haproxy:
            writer.server_names = {p: dataplanes.render_template(
                self.dispatch.haproxy.server, ns, name, p) for p in weights}
        if isinstance(writer, envoy_plane.EnvoyEdsWriter) and self.dispatch.envoy:
            e = self.dispatch.envoy
            writer.addresses = {p: (dataplanes.render_template(e.host, ns, name, p), e.port)
                                for p in weights}
        try:
            result = dataplanes.write_all([writer], weights)[0]
        except Exception as exc:  # a data plane must never take the cycle down
            log.exception("data plane %s for %s failed", sink, workload)
            failures[sink] = f"{type(exc).__name__}: {exc}"
            return
        held = dict(delivered.get(sink, {}))
        for pod, weight in weights.items():
            why = result.failed.get(pod)
            if why is None or not why.startswith(_TEMPORARY_PREFIXES):
                # written, or refused for good (no such server, no address): retrying the same
                # weight cannot help; it is logged by the writer and retried when it changes
                held[pod] = weight
        delivered[sink] = held
        if result.ok:
            failures.pop(sink, None)
        else:
            failures[sink] = result.message or "write failed"

    def _sinks(self, workload: str) -> list[str]:
        sinks = [] if self._backend_unsupported else [BACKEND]
        return sinks + [w.target for w in self.writers(workload)]

    # ------------------------------------------------------------------ engine input
    def _update(self, workload: str, ws: WorkloadState, now: float) -> pw.WeightUpdate:
        """The engine's update for ``now`` (computed once per cycle: planners may ask for the
        steps more than once, and several intents may target one workload)."""
        cached = self.last_update.get(workload)
        if cached is not None and self._updated_at.get(workload) == now:
            return cached
        eng = self.engine(workload)
        present = {p.name for p in ws.pods}
        for gone in set(eng.weights) - present:
            eng.forget(gone)
        for sink_weights in self.delivered.get(workload, {}).values():
            for gone in set(sink_weights) - present:
                del sink_weights[gone]
        ready = [p.name for p in ws.pods if p.ready and p.node is not None]
        sinks = self._sinks(workload)
        lb = self.delivered.get(workload, {}).get(sinks[0], {}) if sinks else {}
        shares = traffic_shares(ready, lb)
        rate = ws.request_rate if ws.request_rate is None or math.isfinite(ws.request_rate) \
            else None
        samples = [endpoint_metrics(p, rate, shares.get(p.name), now) for p in ws.pods]
        update = eng.update(samples, now)
        self.last_update[workload] = update
        self._updated_at[workload] = now
        return update

    def _warn_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    # ------------------------------------------------------------------ copies
    def __deepcopy__(self, memo: dict[int, Any]) -> WeightsActuator:
        """Independent copy (plan previews copy the live actuators): engines hold a lock,
        which is replaced, not copied."""
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for key, value in vars(self).items():
            if key == "engines":
                value = {w: _copy_engine(e, memo) for w, e in value.items()}
            else:
                value = copy.deepcopy(value, memo)
            setattr(clone, key, value)
        return clone


_LOCK_TYPE = type(threading.Lock())


def _copy_engine(engine: pw.WeightEngine, memo: dict[int, Any]) -> pw.WeightEngine:
    clone = object.__new__(type(engine))
    for key, value in vars(engine).items():
        setattr(clone, key, threading.Lock() if isinstance(value, _LOCK_TYPE)
                else copy.deepcopy(value, memo))
    return clone
