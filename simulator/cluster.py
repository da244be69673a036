"""The simulated cluster: nodes in pools, workloads with pods, load, latency, failures.

It implements :class:`planner.domain.ports.ClusterBackend` (observe, scale, resize, move, weights)
and :class:`planner.domain.ports.KPISource` (latency percentiles, throughput, availability, cost,
power measured over a sliding window), advanced by :meth:`SimulatedCluster.step`.
"""

from __future__ import annotations

import math
import time as _time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from planner.domain import geography
from planner.domain.errors import PermanentError
from planner.domain.intents import Intent, KPIProfile, KPIType
from planner.domain.ports import ClusterBackend, KPISource, UnsupportedOperation
from planner.domain.state import (
    CanaryState,
    ClusterSnapshot,
    NodeState,
    PodState,
    WorkloadConfig,
    WorkloadState,
)
from simulator import queueing, regions
from simulator.objects import SimNode, SimPod
from simulator.resize import DisruptionCounts, InPlaceResizer
from simulator.scenario import Scenario, WorkloadSpec
from simulator.scheduling import NodeIndex
from simulator.traces import Trace

WATTS_PER_CORE = 12.0
WATTS_PER_GPU = 250.0


@dataclass(frozen=True)
class StepRecord:
    time: float
    dt: float
    offered: float
    served: float
    dropped: float
    components: queueing.Components
    cores: float
    gpus: int
    cost_per_hour: float
    mean_utilization: float | None
    pool_cores: tuple[tuple[str, float], ...] = ()
    """Cores of the scheduled pods per node pool (pools with none left out)."""


@dataclass(frozen=True, slots=True)
class ServedStep:
    """One step a workload's ready pods served (the metrics window): per pod, by
    :attr:`SimPod.serial`, its CPU utilisation and the requests per second it served."""

    time: float
    dt: float
    serials: NDArray[np.int64]
    utilization: NDArray[np.float64]
    served: NDArray[np.float64]


@dataclass
class SimWorkload:
    spec: WorkloadSpec
    config: WorkloadConfig
    trace: Trace
    pods: list[SimPod] = field(default_factory=list)
    canary: WorkloadConfig | None = None
    """The canary's shape and pod count (a second Deployment behind the same Service)."""
    canary_pods: list[SimPod] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)
    history: deque[StepRecord] = field(default_factory=deque)
    served: deque[ServedStep] = field(default_factory=deque)
    """The steps of the metrics window, oldest first."""
    next_pod: int = 0
    disruption: DisruptionCounts = field(default_factory=DisruptionCounts)
    exposure: tuple[str, ...] | None = None
    """The pools exposing the workload's Service (``None``: one Service for the whole
    cluster, no geography); :mod:`simulator.regions`."""
    drain_ready: int = 0
    """Ready pods when the Service was last withdrawn from a pool: the withdrawn pools drain
    until as many (or all the new ones) are ready where the exposure now is."""
    pool_replicas: dict[str, int] | None = None
    """Pods per exposing pool set by a per-pool autoscaler (:meth:`SimulatedCluster.scale_pools`,
    :mod:`simulator.pool_hpa`); ``None``: the config's replicas split by routed demand."""

    @property
    def key(self) -> str:
        return self.spec.key


class SimulatedCluster(ClusterBackend, KPISource):
    """Deterministic for a given scenario and seed."""

    name = "simulator"

    def __init__(self, scenario: Scenario, seed: int | None = None,
                 measurement_noise: float = 0.02, start_time: float | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.spec.seed if seed is None else seed
        self.rng = np.random.default_rng(self.seed)
        self.noise_rng = np.random.default_rng((self.seed, 7))
        self.measurement_noise = measurement_noise
        self.start = _time.time() if start_time is None else start_time
        """Wall-clock second the run starts at; traces see ``time - start``."""
        self.time = self.start
        self.window_s = scenario.spec.kpi_window_s
        self.metrics_window_s = min(15.0, self.window_s)
        """Request rate and CPU utilisation are resource metrics: a short window, as
        metrics-server gives them."""
        self.nodes: list[SimNode] = [
            SimNode(f"{p.name}-{i}", p) for p in scenario.spec.cluster.pools for i in range(p.nodes)
        ]
        self.node_index = NodeIndex(self.nodes)
        self.pools = {p.name: p for p in scenario.spec.cluster.pools}
        cluster = scenario.spec.cluster
        self.in_place: InPlaceResizer | None = (
            InPlaceResizer(cluster.resize_delay_s, cluster.resize_deferred_limit_s)
            if cluster.in_place_resize else None)
        """How :meth:`resize` changes running pods: in place (:mod:`simulator.resize`), or
        ``None``: by a rolling update."""
        self.regions = regions.Regions.of(scenario, self.seed)
        """Client geography (``None``: the scenario declares no clients)."""
        self.workloads: dict[str, SimWorkload] = {}
        for w in scenario.spec.workloads:
            cfg = WorkloadConfig(w.replicas, w.cpu, w.device, w.pool)
            sw = SimWorkload(w, cfg, scenario.trace_for(w, self.seed))
            if w.exposure is not None:
                sw.exposure = tuple(sorted(set(w.exposure)))
                self._reconcile_exposed(sw, self.time, started=True)
            else:
                for _ in range(w.replicas):
                    pod = self._new_pod(sw, started=True)
                    sw.pods.append(pod)
            self.workloads[w.key] = sw

    # ------------------------------------------------------------------ clock and dynamics
    def now(self) -> float:
        return self.time

    @property
    def elapsed(self) -> float:
        return self.time - self.start

    def step(self, dt: float) -> None:
        """Advance the cluster by ``dt`` seconds."""
        t = self.time
        for w in self.workloads.values():
            self._reconcile(w, t)
            self._serve(w, t, dt)
        self.time = t + dt

    def _new_pod(self, w: SimWorkload, started: bool = False,
                 cfg: WorkloadConfig | None = None, pool: str | None = None) -> SimPod:
        cfg = w.config if cfg is None else cfg
        name = f"{w.spec.name}-{'canary-' if cfg is w.canary else ''}{w.next_pod}"
        pod = SimPod(name, cfg.cpu, cfg.device, cfg.pool if pool is None else pool, self.time,
                     serial=w.next_pod)
        w.next_pod += 1
        self._schedule(pod, w.spec, immediate=started)
        return pod

    def _schedule(self, pod: SimPod, spec: WorkloadSpec, immediate: bool = False) -> None:
        """On the eligible node with the most free CPU (:mod:`simulator.scheduling`)."""
        best = self.node_index.pick(pod.pool, pod.cpu, pod.gpus)
        if best is None:
            return
        assert isinstance(best, SimNode)
        best.cpu_allocated += pod.cpu
        best.gpus_allocated += pod.gpus
        self.node_index.changed(best)
        pod.node = best
        pod.ready_at = self.time if immediate else self.time + spec.service.startup_s

    def _delete(self, w: SimWorkload, pod: SimPod) -> None:
        if pod.node is not None:
            pod.node.cpu_allocated -= pod.cpu
            if pod.reserved:
                pod.node.cpu_allocated -= pod.reserved
            pod.node.gpus_allocated -= pod.gpus
            self.node_index.changed(pod.node)
            pod.node = None
        (w.canary_pods if pod in w.canary_pods else w.pods).remove(pod)
        w.weights.pop(pod.name, None)

    def _reconcile_canary(self, w: SimWorkload) -> None:
        """The canary's own Deployment: its pod count of its shape; a new shape replaces the
        canary's pods at once (a canary is small and serves beside the workload)."""
        cfg = w.canary
        for pod in list(w.canary_pods):
            if cfg is None or not pod.matches(cfg):
                self._delete(w, pod)
            elif pod.node is None:
                self._schedule(pod, w.spec)
        if cfg is None:
            return
        while len(w.canary_pods) < cfg.replicas:
            w.canary_pods.append(self._new_pod(w, cfg=cfg))
        for pod in sorted(w.canary_pods, key=lambda p: -p.created_at)[
                : len(w.canary_pods) - cfg.replicas]:
            self._delete(w, pod)

    def _reconcile(self, w: SimWorkload, t: float) -> None:
        """A Deployment controller: converge pods on the desired config, rolling updates
        (with in-place resize on, pods that differ in their CPU size alone are resized where
        they run instead, :mod:`simulator.resize`, and count as the config's)."""
        if w.exposure is not None:
            self._reconcile_exposed(w, t)
            return
        cfg = w.config
        if self.in_place is not None:
            for pod in self.in_place.advance(w.pods, cfg, t, self.node_index, w.disruption):
                self._delete(w, pod)              # evicted: replaced below, as a scale-up
        for pod in w.pods:
            if pod.node is None:
                self._schedule(pod, w.spec)
        current = [p for p in w.pods if p.matches(cfg) or p.resize_to == cfg.cpu]
        old = [p for p in w.pods if not (p.matches(cfg) or p.resize_to == cfg.cpu)]
        replaced: list[SimPod] | None = None
        while len(current) < cfg.replicas:
            pod = self._new_pod(w)
            w.pods.append(pod)
            current.append(pod)
            if old:
                replaced = self._count_restart(w, old, replaced)
        if len(current) > cfg.replicas:
            # Remove not-ready pods first, then the newest.
            current.sort(key=lambda p: (p.ready(t), -p.created_at))
            for pod in current[: len(current) - cfg.replicas]:
                self._delete(w, pod)
            current = current[len(current) - cfg.replicas:]
        ready_new = sum(1 for p in current if p.ready(t))
        keep_old = max(0, cfg.replicas - ready_new)
        old.sort(key=lambda p: (not p.ready(t), p.created_at))
        for pod in old[keep_old:]:
            self._delete(w, pod)
        if w.canary is not None or w.canary_pods:
            self._reconcile_canary(w)

    def _reconcile_exposed(self, w: SimWorkload, t: float, started: bool = False) -> None:
        """A Deployment per exposing pool (:mod:`simulator.regions`): the config's replicas
        split over the exposing pools by the demand each is routed (or the counts a per-pool
        autoscaler set); pods of another shape, or beyond their pool's count, go as the new
        ones are ready (make before break, as a rolling update); pods in a pool no longer
        exposing keep serving its clients until the new ones are ready (draining)."""
        assert self.regions is not None and w.exposure is not None
        cfg = w.config
        for pod in w.pods:
            if pod.node is None:
                self._schedule(pod, w.spec)
        if w.pool_replicas is not None:
            want = {p: w.pool_replicas.get(p, 1) for p in w.exposure}
        else:
            lam = w.trace.rate(t - self.start)
            want = geography.split_replicas(cfg.replicas, self.regions.routed(
                lam, t - self.start, w.exposure, self.pool_region))
        placed: list[SimPod] = []
        old: list[SimPod] = []
        by_pool: dict[str | None, list[SimPod]] = {}
        for pod in w.pods:
            if pod.cpu == cfg.cpu and pod.device == cfg.device and pod.pool in want:
                by_pool.setdefault(pod.pool, []).append(pod)
            else:
                old.append(pod)
        for pool, n in want.items():
            mine = by_pool.get(pool, [])
            mine.sort(key=lambda p: (not p.ready(t), p.created_at))
            placed.extend(mine[:n])
            old.extend(mine[n:])
            for _ in range(n - len(mine)):
                pod = self._new_pod(w, started=started, pool=pool)
                w.pods.append(pod)
                placed.append(pod)
        ready_new = sum(1 for p in placed if p.ready(t))
        # A pool the Service was withdrawn from drains: its ready pods keep serving its
        # clients (:meth:`_serving`) until the pools exposing it now have as many ready pods
        # as served every client when it was withdrawn (or all theirs), then go together (cut
        # over, not a pod at a time under all of that pool's clients).
        withdrawn = [p for p in old if p.pool not in want]
        drain = ready_new < min(len(placed), w.drain_ready)
        for pod in withdrawn:
            if not (drain and pod.ready(t)):
                self._delete(w, pod)
        old = [p for p in old if p.pool in want]
        keep_old = max(0, cfg.replicas - ready_new)
        old.sort(key=lambda p: (not p.ready(t), p.created_at))
        for pod in old[keep_old:]:
            self._delete(w, pod)
        if w.canary is not None or w.canary_pods:
            self._reconcile_canary(w)

    @staticmethod
    def _serving(w: SimWorkload, t: float) -> tuple[str, ...] | None:
        """The pools whose load balancers serve the workload's clients at ``t`` (``None``: not
        exposed per pool): its exposure, and the pools it was withdrawn from whose ready pods
        the rolling update still keeps (draining: a withdrawn pool serves its clients until
        the pods that replace its pods elsewhere are ready, and its load balancer goes with
        its last pod). Without it a narrowed exposure would route clients at once to pools
        whose new pods are still starting, while the kept pods served nobody."""
        if w.exposure is None:
            return None
        draining = {p.node.pool.name for p in w.pods
                    if p.node is not None and p.ready(t) and p.node.pool.name not in w.exposure}
        return tuple(sorted({*w.exposure, *draining})) if draining else w.exposure

    @property
    def pool_region(self) -> dict[str, str]:
        return {name: p.region for name, p in self.pools.items()}

    @staticmethod
    def _count_restart(w: SimWorkload, old: list[SimPod], running: list[SimPod] | None
                       ) -> list[SimPod]:
        """A new pod of the config's shape was started while ``old`` pods of another shape
        run: it replaces one of them not replaced yet (the oldest), a restart
        (:attr:`DisruptionCounts.restarts`); none left: a scale-out. Returns the old pods on a
        node still without a replacement (``running``: as returned before, this cycle)."""
        shape = (w.config.cpu, w.config.device, w.config.pool)
        if running is None:
            running = sorted((p for p in old if p.node is not None
                              and p.succeeded_for != shape), key=lambda p: -p.created_at)
        if running:
            running.pop().succeeded_for = shape
            w.disruption.restarts += 1
        return running

    def _serve(self, w: SimWorkload, t: float, dt: float) -> None:
        svc = w.spec.service
        lam = w.trace.rate(t - self.start)
        ready = [p for p in (*w.pods, *w.canary_pods) if p.ready(t)]
        failed = np.zeros(len(ready))
        if svc.failure_rate_per_hour > 0 and ready:
            p_fail = 1.0 - math.exp(-svc.failure_rate_per_hour * dt / 3600.0)
            hits = self.rng.random(len(ready)) < p_fail
            for i in np.flatnonzero(hits):
                pod = ready[i]
                pod.down_until = t + svc.restart_s
                pod.restarts += 1
                failed[i] = min(svc.detection_s, dt) / dt
        mu = np.array([queueing.service_rate(svc.rate_per_core, p.cpu, svc.cpu_exponent,
                                             svc.gpu_speedup, p.device)
                       * (p.node.pool.speed if p.node else 1.0) for p in ready])
        base = np.array([svc.base_latency_ms + (p.node.pool.network_latency_ms if p.node else 0.0)
                         for p in ready])
        shares = dispatch_shares([p.name for p in ready], w.weights)
        servers = np.array([max(1, int(p.cpu)) for p in ready], dtype=np.int64)
        serving = self._serving(w, t)
        if serving is not None and self.regions is not None:
            out = self.regions.serve(lam, t - self.start, serving, self.pool_region,
                                     [p.node.pool.name if p.node else "" for p in ready],
                                     shares, mu, base, svc.timeout_ms, failed, servers)
        else:
            out = queueing.step_outcome(lam, shares, mu, base, svc.timeout_ms, failed, servers)
        metrics_start = t - self.metrics_window_s
        served = out.served_per_pod if out.served_per_pod is not None else np.zeros(len(ready))
        for pod in (*w.pods, *w.canary_pods):
            pod.utilization = 0.0
        for pod, u in zip(ready, out.utilization.tolist(), strict=True):
            pod.utilization = u
        if ready:
            w.served.append(ServedStep(
                t, dt, np.fromiter((p.serial for p in ready), np.int64, len(ready)),
                np.asarray(out.utilization, dtype=np.float64),
                np.asarray(served, dtype=np.float64)))
        while w.served and w.served[0].time < metrics_start:
            w.served.popleft()
        # One pass over the scheduled pods, each total added in pod order from 0 (as ``sum``
        # adds): cores, GPUs, cost per hour, and cores per node pool.
        cores, gpus, cost = 0.0, 0, 0.0
        per_pool: dict[str, float] = {}
        for p in (*w.pods, *w.canary_pods):
            node = p.node
            if node is None:
                continue
            pool = node.pool
            cores += p.cpu
            gpus += p.gpus
            cost += p.cpu * pool.cost_per_core_hour + p.gpus * pool.cost_per_gpu_hour
            per_pool[pool.name] = per_pool.get(pool.name, 0.0) + p.cpu
        if serving is not None and self.regions is not None:
            cost += self.regions.lb_cost_per_hour * len(serving)
        mean_util = float(out.utilization.mean()) if out.utilization.size else None
        w.history.append(StepRecord(t, dt, lam, out.served, out.dropped, out.components, cores,
                                    gpus, cost, mean_util, tuple(per_pool.items())))
        horizon = t - max(self.window_s, 60.0) - dt
        while w.history and w.history[0].time < horizon:
            w.history.popleft()

    # ------------------------------------------------------------------ ClusterBackend
    def observe(self) -> ClusterSnapshot:
        t = self.time
        nodes = tuple(
            NodeState(n.name, n.pool.name, n.pool.region, n.pool.cpu, n.cpu_allocated, n.pool.gpus,
                      n.gpus_allocated, n.pool.cost_per_core_hour, n.pool.cost_per_gpu_hour)
            for n in self.nodes
        )
        workloads: dict[str, WorkloadState] = {}
        for key, w in self.workloads.items():
            recs = self.window(key, self.metrics_window_s)
            rate = _mean([r.offered for r in recs])
            util = _mean([r.mean_utilization for r in recs if r.mean_utilization is not None])
            states = self._pod_states(w, t)
            pods = tuple(states[:len(w.pods)])
            # One busy fraction per pod: a GPU pod's is its GPU's, reported as such (as the
            # DCGM exporter's), so the workload's is how busy its serving devices are.
            on_gpu = any(p.ready and p.gpu_utilization is not None for p in pods)
            canary = None if w.canary is None else CanaryState(
                w.canary, tuple(states[len(w.pods):]))
            exposure, demand = None, None
            if w.exposure is not None and self.regions is not None:
                exposure = w.exposure
                demand = self.regions.demand(rate or 0.0, t - self.start)
            workloads[key] = WorkloadState(w.spec.namespace, w.spec.name, w.config, pods,
                                           request_rate=rate, cpu_utilization=util,
                                           canary=canary, exposure=exposure,
                                           client_demand=demand,
                                           utilization=util if on_gpu else None)
        return ClusterSnapshot(t, nodes, workloads, in_place_resize=self.in_place is not None,
                               geography=None if self.regions is None else self.regions.geo)

    def _pod_states(self, w: SimWorkload, t: float) -> list[PodState]:
        """The workload's pods, then its canary's, as observed at ``t``."""
        pods = (*w.pods, *w.canary_pods)
        util, rate, seen = self._pod_metrics(w, pods, t)
        out = []
        for p, u, r, s in zip(pods, util, rate, seen, strict=True):
            node = p.node
            ready = p.ready(t)
            cpu_util, req_rate = (u, r) if ready and s else (
                (p.utilization if ready else 0.0), None)
            out.append(PodState(p.name, node.name if node else None, p.cpu, p.device, ready,
                                p.restarts, p.created_at, cpu_util,
                                node.pool.name if node else None, req_rate,
                                gpu_utilization=cpu_util if ready and p.device == "gpu"
                                else None))
        return out

    def _pod_metrics(self, w: SimWorkload, pods: tuple[SimPod, ...], t: float
                     ) -> tuple[list[float], list[float], list[bool]]:
        """Per pod, CPU utilisation and requests per second over the metrics window (as
        metrics-server and per-pod request metrics report them): time-weighted means over the
        steps the pod served while ready, and whether it served any. Each pod's sums are added
        step by step from 0, oldest first, as a per-pod loop adds them."""
        n = len(pods)
        span = np.zeros(n)
        busy = np.zeros(n)
        served = np.zeros(n)
        if n and w.served:
            start = t - self.metrics_window_s
            serials = np.fromiter((p.serial for p in pods), np.int64, n)
            order = np.argsort(serials, kind="stable")
            ranked = serials[order]
            for step in w.served:
                if step.time < start:
                    continue
                at = np.minimum(np.searchsorted(ranked, step.serials), n - 1)
                hit = ranked[at] == step.serials
                idx = order[at[hit]]
                span[idx] += step.dt
                busy[idx] += step.dt * step.utilization[hit]
                served[idx] += step.dt * step.served[hit]
        seen = span > 0
        safe = np.where(seen, span, 1.0)
        return (busy / safe).tolist(), (served / safe).tolist(), seen.tolist()

    def _workload(self, key: str) -> SimWorkload:
        try:
            return self.workloads[key]
        except KeyError:
            raise PermanentError(f"no workload {key!r} in the simulated cluster") from None

    def scale(self, workload: str, replicas: int) -> None:
        w = self._workload(workload)
        w.config = w.config.with_(replicas=max(0, int(replicas)))

    def resize(self, workload: str, cpu: float) -> None:
        """The CPU size of the workload's pods: a rolling update, or with
        ``cluster.in_place_resize`` running pods resized where they run
        (:mod:`simulator.resize`), both at the next step."""
        w = self._workload(workload)
        if cpu <= 0:
            raise PermanentError(f"cpu must be > 0 for {workload}")
        w.config = w.config.with_(cpu=float(cpu))

    def set_device(self, workload: str, device: str) -> None:
        w = self._workload(workload)
        if device not in ("cpu", "gpu"):
            raise UnsupportedOperation(f"unknown device {device!r}")
        w.config = w.config.with_(device=device)

    def place(self, workload: str, pool: str | None) -> None:
        w = self._workload(workload)
        if pool is not None and pool not in self.pools:
            raise PermanentError(f"no node pool {pool!r}")
        w.config = w.config.with_(pool=pool)

    def remove_pod(self, workload: str, pod: str) -> None:
        w = self._workload(workload)
        for p in list(w.pods):
            if p.name == pod:
                self._delete(w, p)
                w.config = w.config.with_(replicas=max(0, w.config.replicas - 1))
                return

    def expose(self, workload: str, pools: tuple[str, ...]) -> None:
        """Expose the workload through the load balancers of ``pools`` (its pods follow at the
        next step). Needs the scenario's ``clients``."""
        w = self._workload(workload)
        if self.regions is None:
            raise UnsupportedOperation("this scenario declares no clients: its Services are "
                                       "not exposed per pool")
        chosen = tuple(sorted(set(pools)))
        if not chosen:
            raise PermanentError(f"{workload}: expose it in at least one pool")
        unknown = [p for p in chosen if p not in self.pools]
        if unknown:
            raise PermanentError(f"no node pool {unknown[0]!r}")
        if set(w.exposure or ()) - set(chosen):
            w.drain_ready = sum(1 for p in w.pods if p.ready(self.time))
        w.exposure = chosen

    def scale_pools(self, workload: str, counts: dict[str, int]) -> None:
        """Pods per exposing pool, each pool's Deployment scaled on its own (a HorizontalPod-
        Autoscaler per pool, :mod:`simulator.pool_hpa`), from the next step on; an exposing
        pool ``counts`` does not name keeps one pod. The config's replicas become the sum.
        Simulator only: the planner's port scales a workload as a whole."""
        w = self._workload(workload)
        if w.exposure is None or self.regions is None:
            raise UnsupportedOperation(f"{workload} is not exposed per pool: scale it as a "
                                       "whole")
        bad = {p: n for p, n in counts.items() if p not in w.exposure or n < 0}
        if bad:
            raise PermanentError(f"{workload}: pool counts {bad} name pools not exposing it "
                                 f"({', '.join(w.exposure)}) or are negative")
        w.pool_replicas = {p: int(counts.get(p, 1)) for p in w.exposure}
        w.config = w.config.with_(replicas=sum(w.pool_replicas.values()))

    def set_canary(self, workload: str, canary: WorkloadConfig | None) -> None:
        w = self._workload(workload)
        if canary is not None and canary.device not in ("cpu", "gpu"):
            raise UnsupportedOperation(f"unknown device {canary.device!r}")
        if canary is not None and canary.pool is not None and canary.pool not in self.pools:
            raise PermanentError(f"no node pool {canary.pool!r}")
        w.canary = canary if canary is not None and canary.replicas > 0 else None

    def set_weights(self, workload: str, weights: dict[str, int]) -> None:
        """Per-pod dispatch weights, level-based (replaces the previous set); see
        :func:`dispatch_shares` for how they are used."""
        w = self._workload(workload)
        w.weights = {k: int(v) for k, v in weights.items()}

    def traffic_shares(self, workload: str) -> dict[str, float]:
        """Share of the workload's arrivals each ready pod receives now (sums to 1)."""
        w = self._workload(workload)
        ready = [p.name for p in (*w.pods, *w.canary_pods) if p.ready(self.time)]
        return dict(zip(ready, (float(x) for x in dispatch_shares(ready, w.weights)),
                        strict=True))

    # ------------------------------------------------------------------ KPISource
    def window(self, key: str, seconds: float | None = None,
               end: float | None = None) -> list[StepRecord]:
        span = self.window_s if seconds is None else seconds
        stop = self.time if end is None else end
        return [r for r in self._workload(key).history if stop - span <= r.time < stop]

    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        recs = self.window(intent.workload_key)
        value = kpi_value(profile, recs)
        if value is None or profile.spec.type in (KPIType.COST, KPIType.AVAILABILITY):
            return value
        noise = float(np.exp(self.noise_rng.normal(0.0, self.measurement_noise)))
        return value * noise


def dispatch_shares(ready: list[str], weights: dict[str, int]) -> queueing.FloatArray:
    """How the simulated load balancer splits arrivals over the ``ready`` pods.

    Only ready pods receive traffic (a not-ready pod is not in ``ready``). A ready pod's share
    is its weight over the sum; a ready pod without a positive weight (new since the weights
    were written, or written as 0 while it was not ready) gets the mean of the positive weights,
    as the weight engine gives a new endpoint the mean weight during its blackout. No weights
    at all: equal shares (round robin).
    """
    n = len(ready)
    if n == 0:
        return np.zeros(0)
    given = [weights.get(name, 0) for name in ready]
    positive = [float(v) for v in given if v > 0]
    if not positive:
        return np.full(n, 1.0 / n)
    mean = sum(positive) / len(positive)
    raw = np.array([float(v) if v > 0 else mean for v in given])
    shares: queueing.FloatArray = raw / raw.sum()
    return shares


def _mean(xs: list[float]) -> float | None:
    return float(sum(xs) / len(xs)) if xs else None


def kpi_value(profile: KPIProfile, recs: list[StepRecord]) -> float | None:
    """The true value of a KPI over ``recs`` (no measurement noise)."""
    if not recs:
        return None
    kind = profile.spec.type
    total_time = sum(r.dt for r in recs)
    if kind is KPIType.LATENCY:
        parts = [queueing.Components(r.components.weight * r.dt, r.components.offset_ms,
                                     r.components.rate_per_ms) for r in recs]
        return queueing.quantile(queueing.Components.concat(parts),
                                 profile.spec.latency_percentile / 100.0)
    if kind is KPIType.THROUGHPUT:
        return sum(r.served * r.dt for r in recs) / total_time
    if kind is KPIType.AVAILABILITY:
        offered = sum((r.served + r.dropped) * r.dt for r in recs)
        return 1.0 if offered <= 0 else sum(r.served * r.dt for r in recs) / offered
    if kind is KPIType.COST:
        return sum(r.cost_per_hour * r.dt for r in recs) / total_time
    if kind is KPIType.POWER:
        return sum((r.cores * WATTS_PER_CORE + r.gpus * WATTS_PER_GPU) * r.dt
                   for r in recs) / total_time
    return None
