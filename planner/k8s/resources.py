"""The Kubernetes resource types the planner reads, and how to address them."""

from __future__ import annotations

from dataclasses import dataclass

from planner.domain.intents import API_GROUP
from planner.k8s import openyurt


@dataclass(frozen=True)
class ResourceType:
    """One API resource: ``group``/``version``/``plural`` (``group`` is ``""`` for core)."""

    plural: str
    group: str
    version: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The URL path: cluster-wide when ``namespace`` is ``None`` (or not namespaced)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        if subresource is not None:
            base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.api_version}"


PODS = ResourceType("pods", "", "v1", "Pod")
NODES = ResourceType("nodes", "", "v1", "Node", namespaced=False)
SERVICES = ResourceType("services", "", "v1", "Service")
DEPLOYMENTS = ResourceType("deployments", "apps", "v1", "Deployment")
STATEFULSETS = ResourceType("statefulsets", "apps", "v1", "StatefulSet")
ENDPOINTSLICES = ResourceType("endpointslices", "discovery.k8s.io", "v1", "EndpointSlice")
INTENTS = ResourceType("intents", API_GROUP, "v1alpha1", "Intent")
KPIPROFILES = ResourceType("kpiprofiles", API_GROUP, "v1alpha1", "KPIProfile")
POOLSERVICES = ResourceType(openyurt.POOLSERVICE_PLURAL, openyurt.POOLSERVICE_GROUP,
                            openyurt.POOLSERVICE_VERSION, openyurt.POOLSERVICE_KIND)
NODEPOOLS = ResourceType(openyurt.NODEPOOL_PLURAL, openyurt.NODEPOOL_GROUP,
                         openyurt.NODEPOOL_VERSION, openyurt.NODEPOOL_KIND, namespaced=False)
"""OpenYurt's multi-region exposure API (read by the PoolService fan-out, not observed by the
backend: not in :data:`ALL`)."""

ALL: tuple[ResourceType, ...] = (PODS, NODES, DEPLOYMENTS, STATEFULSETS, SERVICES,
                                 ENDPOINTSLICES, INTENTS, KPIPROFILES)
BY_PLURAL: dict[str, ResourceType] = {r.plural: r for r in ALL}
WORKLOADS: dict[str, ResourceType] = {"Deployment": DEPLOYMENTS, "StatefulSet": STATEFULSETS}
"""Workload kinds the backend observes and scales, by ``spec.targetRef.kind``."""
