"""What the Kubernetes backend reports for the exposure decision (issue 14, docs/regions.md).

Runs on every snapshot when the backend settings' ``exposure.latencyMs`` is set
(:class:`planner.k8s.settings.ExposureSettings`); otherwise the snapshot is left as it was.

* **Which Service.** A workload ``ns/name`` is served by the Service ``ns/name``, the mapping
  :meth:`~planner.k8s.backend.KubernetesBackend.expose` writes to and the load metrics and KPI
  templates read (label ``service=<name>``). It is *exposed per pool* when that Service is
  selected as OpenYurt's fan-out selects it (:func:`planner.k8s.poolservice_desired.is_selected`:
  ``type: LoadBalancer``, a ``loadBalancerClass``, a non-blank
  ``service.openyurt.io/nodepool-labelselector``). Other workloads get no exposure (``None``):
  annotate the Service once (e.g. with its home pool) to hand its exposure to the planner.
* **Current exposure** (:func:`current_exposure`): the NodePools the selector matches (not
  being deleted), read from the shared watch cache when it watches NodePools (the operator's
  PoolService fan-out does); without them, the pools a selector of the planner's own form
  names (``openyurt.io/pool-name in (a,b)``, :func:`planner.k8s.openyurt.pool_selector`).
  Another selector without NodePools, or one that does not parse: no exposure, with a note.
* **Geography**: the round trips and the load balancer's cost from the settings; a pool's
  region is its nodes' region label (the snapshot's), or, for nodes without one, the
  NodePool's ``topology.kubernetes.io/region`` label (the backend's region label key).
* **Client demand** per region of each exposed workload's Service, from Prometheus
  (:mod:`planner.k8s.client_demand`), one query per exposed Service per cycle. A failure leaves
  the demand unknown with a note (:attr:`~planner.domain.state.WorkloadState.exposure_note`)
  that the plan's reason carries; after one failure the other Services of that cycle are not
  queried (same note). Demand from a client region the round-trip table does not list is left
  out, and the note names it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from planner.domain.geography import Geography
from planner.domain.state import ClusterSnapshot, NodeState, WorkloadState
from planner.k8s import labelselector, openyurt
from planner.k8s.client_demand import DemandUnavailable
from planner.k8s.poolservice_desired import is_selected, selector_text
from planner.k8s.resources import NODEPOOLS, SERVICES
from planner.k8s.settings import ExposureSettings
from planner.k8s.watchcache import NotReady, WatchCache

log = logging.getLogger(__name__)

Demand = Callable[[str, str], Mapping[str, float]]
"""``demand(namespace, service)``: requests per second by client region."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def current_exposure(service: Mapping[str, Any],
                     nodepools: Sequence[Mapping[str, Any]] | None
                     ) -> tuple[tuple[str, ...] | None, str | None]:
    """The pools ``service``'s selector selects, sorted, and a note when that cannot be told
    (then ``None``). ``nodepools``: every NodePool, or ``None`` when they are not watched."""
    text = selector_text(service)
    try:
        selector = labelselector.parse(text)
    except labelselector.SelectorError as exc:
        return None, f"annotation {openyurt.POOL_SELECTOR_ANNOTATION}: {exc}"
    if nodepools is not None:
        return tuple(sorted(
            str(_meta(np).get("name")) for np in nodepools
            if not _meta(np).get("deletionTimestamp")
            and selector.matches(_meta(np).get("labels") or {}))), None
    reqs = selector.requirements
    if len(reqs) == 1 and reqs[0].key == openyurt.NODEPOOL_NAME_LABEL and reqs[0].op == "in":
        return tuple(sorted(reqs[0].values)), None
    return None, (f"the selector {text!r} is not of the form "
                  f"'{openyurt.NODEPOOL_NAME_LABEL} in (...)' and NodePools are not watched "
                  f"(the PoolService fan-out watches them), so which pools it selects is "
                  f"unknown")


class ExposureObserver:
    """Adds exposure, geography and client demand to a snapshot (see the module docstring)."""

    def __init__(self, cache: WatchCache, settings: ExposureSettings, demand: Demand | None,
                 region_label: str = "topology.kubernetes.io/region",
                 ready_wait_s: float = 0.0) -> None:
        self.cache = cache
        self.ready_wait_s = ready_wait_s
        self.settings = settings
        self.demand = demand
        self.region_label = region_label
        self.geography = Geography({c: dict(row) for c, row in settings.latency_ms.items()},
                                   settings.lb_cost_per_hour)
        self._logged: dict[str, str] = {}

    def _nodepools(self) -> list[dict[str, Any]] | None:
        if not self.cache.ready(NODEPOOLS):  # never starts the watch: the fan-out does
            return None
        return self.cache.list(NODEPOOLS)

    def apply(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        """``snap`` with the geography, and exposure and client demand for the workloads
        exposed per pool; ``snap`` as it is while the Services' initial list is not in
        the watch cache yet (after ``ready_wait_s``; logged)."""
        try:
            self.cache.get(SERVICES, "", "", wait=self.ready_wait_s)  # waits for the list
        except NotReady as exc:
            self._log("*", f"not reported this cycle: {exc}")
            return snap
        nodepools = self._nodepools()
        workloads = dict(snap.workloads)
        failed: str | None = None
        for key, wl in snap.workloads.items():
            svc = self.cache.get(SERVICES, wl.namespace, wl.name)
            if svc is None or not is_selected(svc):
                continue
            pools, note = current_exposure(svc, nodepools)
            if pools == ():
                self._log(key, f"its selector {selector_text(svc)!r} matches no NodePool (label "
                               f"each NodePool {openyurt.NODEPOOL_NAME_LABEL}=<its name>)")
            demand: dict[str, float] | None = None
            if pools is not None:
                demand, failed, note = self._demand(wl, failed)
            workloads[key] = dataclasses.replace(wl, exposure=pools, client_demand=demand,
                                                 exposure_note=note)
            if note:
                self._log(key, note)
        nodes = self._regions(snap.nodes, nodepools)
        return dataclasses.replace(snap, nodes=nodes, workloads=workloads,
                                   geography=self.geography)

    def _demand(self, wl: WorkloadState, failed: str | None
                ) -> tuple[dict[str, float] | None, str | None, str | None]:
        """(demand, the cycle's failure so far, the note)."""
        if self.demand is None:
            return None, failed, "no client-demand source (the backend has no Prometheus)"
        if failed is not None:
            return None, failed, failed
        try:
            raw = dict(self.demand(wl.namespace, wl.name))
        except DemandUnavailable as exc:
            why = f"client demand per region unknown: {exc}"
            return None, why, why
        known = self.geography.client_regions
        out = {r: v for r, v in raw.items() if r in known}
        unknown = sorted(r for r in raw if r not in known)
        if not out:
            why = ("no client demand per region measured (the query returned no series"
                   + (f" of a known region; not in latencyMs: {', '.join(unknown)}"
                      if unknown else "") + ")")
            return None, failed, why
        note = (f"demand from client region(s) {', '.join(unknown)} left out: not in the "
                f"backend settings' exposure.latencyMs" if unknown else None)
        return out, failed, note

    def _regions(self, nodes: tuple[NodeState, ...],
                 nodepools: Sequence[Mapping[str, Any]] | None) -> tuple[NodeState, ...]:
        """Nodes without a region label get their NodePool's (the pool of the same name)."""
        if not nodepools or all(n.region != "unknown" for n in nodes):
            return nodes
        region = {str(_meta(np).get("name")): (_meta(np).get("labels") or {}).get(
            self.region_label) for np in nodepools}
        return tuple(dataclasses.replace(n, region=str(region[n.pool]))
                     if n.region == "unknown" and region.get(n.pool) else n for n in nodes)

    def _log(self, key: str, note: str) -> None:
        if self._logged.get(key) != note:
            log.warning("exposure of %s: %s", key, note)
        self._logged[key] = note
