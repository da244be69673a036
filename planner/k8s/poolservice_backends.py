"""Which servers a pool's load balancer should hold for one Service, from the cluster's objects.

Pure functions over the objects as the API server (or the watch cache's projections) gives
them:

* the Service's **ready endpoints** (:func:`ready_endpoints`): every endpoint of the Service's
  EndpointSlices (``discovery.k8s.io/v1``, label ``kubernetes.io/service-name``) whose
  ``conditions.ready`` is true (or absent, which the API defines as ready), with the port of
  the Service's first port (by name; a slice without it is skipped), named after its pod
  (``targetRef``) or, without one, its address; an endpoint listed in two slices (during a
  rollover of slices) counts once;
* the **pool's nodes** (:func:`pool_nodes`): nodes whose ``apps.openyurt.io/nodepool`` label
  (the label OpenYurt keeps) names the pool; an endpoint is in the pool when its ``nodeName``
  is one of them (an endpoint without a node is in no pool);
* the **weights** (:func:`pool_weights`): the dispatch-weight engine's weight of each pod
  (:mod:`actuators.dispatch`, as the weights actuator publishes them); a pod the engine has
  no weight for yet (a new one) gets the mean of the pool's known positive weights, or the
  engine's reference weight when none is known, the engine's own rule for a new endpoint;
  when every weight of the pool is 0 (every pod pinned away), each gets the reference weight,
  since a load balancer whose servers all weigh 0 serves nobody.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from actuators.dataplanes import haproxy_servers
from planner.k8s import openyurt

SERVICE_NAME = "kubernetes.io/service-name"
"""Label of an EndpointSlice naming its Service."""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One ready endpoint of a Service: its server name, address, port and node."""

    name: str
    address: str
    port: int
    node: str | None


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def service_port_name(service: Mapping[str, Any]) -> str:
    """The name of the Service's first port (``""`` when unnamed or when it has none)."""
    ports = (service.get("spec") or {}).get("ports") or []
    return str(ports[0].get("name") or "") if ports else ""


def ready_endpoints(slices: Iterable[Mapping[str, Any]], service: str,
                    port_name: str = "") -> list[Endpoint]:
    """The ready endpoints of ``service`` in ``slices`` (see the module docstring), by name."""
    out: dict[str, Endpoint] = {}
    for sl in slices:
        if _labels(sl).get(SERVICE_NAME) != service:
            continue
        port = next((p.get("port") for p in sl.get("ports") or ()
                     if str(p.get("name") or "") == port_name), None)
        if not isinstance(port, int):
            continue
        for ep in sl.get("endpoints") or ():
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            addresses = ep.get("addresses") or []
            if not addresses:
                continue
            ref = ep.get("targetRef") or {}
            name = str(ref.get("name") or "") if ref.get("kind", "Pod") == "Pod" else ""
            name = name or str(addresses[0]).replace(":", ".")
            out.setdefault(name, Endpoint(name, str(addresses[0]), port, ep.get("nodeName")))
    return [out[k] for k in sorted(out)]


def pool_nodes(nodes: Iterable[Mapping[str, Any]], pool: str) -> set[str]:
    """Names of the nodes OpenYurt counts in ``pool``."""
    return {str((n.get("metadata") or {}).get("name")) for n in nodes
            if _labels(n).get(openyurt.NODE_POOL_LABEL) == pool}


def in_pool(endpoints: Iterable[Endpoint], nodes: set[str]) -> list[Endpoint]:
    return [e for e in endpoints if e.node is not None and e.node in nodes]


def pool_weights(endpoints: Iterable[Endpoint], weights: Mapping[str, int],
                 reference: int = 64, high: int = 256) -> dict[str, int]:
    """The weight of each endpoint (see the module docstring), within ``[0, high]``."""
    names = [e.name for e in endpoints]
    known = {n: max(0, min(high, int(weights[n]))) for n in names
             if isinstance(weights.get(n), int) and not isinstance(weights.get(n), bool)}
    positive = [w for w in known.values() if w > 0]
    if names and not positive and len(known) == len(names):
        return dict.fromkeys(names, reference)
    fresh = max(1, round(sum(positive) / len(positive))) if positive else reference
    return {n: known.get(n, fresh) for n in names}


def desired_servers(endpoints: Iterable[Endpoint], weights: Mapping[str, int]
                    ) -> tuple[dict[str, haproxy_servers.Server], list[str]]:
    """The HAProxy servers for ``endpoints`` with ``weights``, and why an endpoint HAProxy
    could not hold (a name it refuses, an address that is not an IP) was left out."""
    out: dict[str, haproxy_servers.Server] = {}
    problems: list[str] = []
    for e in endpoints:
        try:
            out[e.name] = haproxy_servers.Server(e.name, e.address, e.port, weights[e.name])
        except ValueError as exc:
            problems.append(str(exc))
    return out, problems
