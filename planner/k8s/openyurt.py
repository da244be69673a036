"""Names of OpenYurt's multi-region exposure API, which intent-planner stays compatible with.

A cluster running OpenYurt (1.5 or later: yurt-manager's ``load-balancer-set`` controller)
already has these resources; on a cluster without it, our operator serves the same API from
the CRDs in ``crds/``. Every module that reads or writes PoolServices, NodePools or the
Service's pool selector takes the strings from here, so they cannot drift apart.
"""

from __future__ import annotations

from typing import Final

POOLSERVICE_GROUP: Final = "network.openyurt.io"
POOLSERVICE_VERSION: Final = "v1alpha1"
POOLSERVICE_KIND: Final = "PoolService"
POOLSERVICE_PLURAL: Final = "poolservices"

NODEPOOL_GROUP: Final = "apps.openyurt.io"
NODEPOOL_VERSION: Final = "v1beta1"
NODEPOOL_KIND: Final = "NodePool"
NODEPOOL_PLURAL: Final = "nodepools"

#: A Service is exposed per pool when it is ``type: LoadBalancer``, has a
#: ``spec.loadBalancerClass`` and this annotation holds a non-empty label selector over
#: NodePool labels.
POOL_SELECTOR_ANNOTATION: Final = "service.openyurt.io/nodepool-labelselector"

#: The node label OpenYurt keeps with the name of the node's pool (``LabelCurrentNodePool`` in
#: OpenYurt's ``apps`` API): a node is in pool ``p`` when this label says ``p``.
NODE_POOL_LABEL: Final = "apps.openyurt.io/nodepool"

SERVICE_NAME_LABEL: Final = "openyurt.io/service-name"
POOL_NAME_LABEL: Final = "openyurt.io/pool-name"
MANAGED_BY_LABEL: Final = "poolservice.openyurt.io/managed-by"
MANAGED_BY: Final = "intent-planner.io/poolservice-fanout"

#: Kept on a selected Service until every PoolService of it is gone.
FINALIZER: Final = "poolservice.openyurt.io/resources"

#: A key ``k`` in a PoolService's ``status.aggregateToAnnotations`` (or ``...Labels``) becomes
#: ``aggregated.k`` on its Service.
AGGREGATED_PREFIX: Final = "aggregated."

#: The load balancer class our reference HAProxy load balancer serves.
HAPROXY_LB_CLASS: Final = "intent-planner.io/haproxy"


def poolservice_name(service: str, pool: str) -> str:
    """The PoolService of ``service`` in ``pool``: ``<service>-<pool>``, as OpenYurt names it."""
    return f"{service}-{pool}"


#: The label a NodePool carries with its own name, which the pool selector the planner writes
#: (:func:`pool_selector`) selects on: the same key as a PoolService's pool label. NodePools
#: without it are not selected. NodePools are the admin's: nothing in intent-planner labels them
#: (the fan-out only reads them); label each pool once
#: (``kubectl label nodepool <pool> openyurt.io/pool-name=<pool>``).
NODEPOOL_NAME_LABEL: Final = POOL_NAME_LABEL


def pool_selector(pools: tuple[str, ...] | list[str]) -> str:
    """The value of :data:`POOL_SELECTOR_ANNOTATION` that selects exactly ``pools`` (a
    set-based label selector over :data:`NODEPOOL_NAME_LABEL`, pools sorted)."""
    if not pools:
        raise ValueError("a pool selector needs at least one pool")
    return f"{NODEPOOL_NAME_LABEL} in ({','.join(sorted(set(pools)))})"
