"""The cluster snapshot built from scratch out of every node, pod and workload (the reference).

:func:`full_snapshot` converts every object, every time: what
:meth:`planner.k8s.backend.KubernetesBackend.observe` did before it became incremental
(:mod:`planner.k8s.snapshot_builder`, which must return exactly this). Kept as the reference the
incremental builder is tested against, and as the baseline ``bench/observe.py`` measures.

Semantics (shared through :mod:`planner.k8s.convert`): a workload's pods are the running pods
of its namespace matching its ``spec.selector``, sorted by name, each with its node's pool;
nodes are sorted by name; workloads keep the order given (Deployments first; a StatefulSet
whose ``namespace/name`` a Deployment has is left out). A canary Deployment is no workload: it
is the :attr:`~planner.domain.state.WorkloadState.canary` of the workload it belongs to, with
the pods carrying the canary label; the workload's pods are those without it
(:mod:`planner.k8s.canary`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from planner.domain.state import CanaryState, ClusterSnapshot, PodState, WorkloadState
from planner.k8s import canary as canaries
from planner.k8s import convert

Raw = Mapping[str, Any]


def effective_workloads(raw_workloads: Iterable[tuple[str, Raw]]) -> list[tuple[str, str, Raw]]:
    """``(key, kind, object)`` in the given order, Deployments first, one per key."""
    out: list[tuple[str, str, Raw]] = []
    seen: set[str] = set()
    for kind, w in sorted(raw_workloads, key=lambda kw: kw[0] != "Deployment"):
        key = convert.workload_key(w)
        if key not in seen:
            seen.add(key)
            out.append((key, kind, w))
    return out


def _pods_of(groups: Iterable[tuple[Mapping[str, str], list[PodState]]],
             pool_of: Mapping[str, str], w: Raw, canary: bool) -> tuple[PodState, ...]:
    """The pods of ``w`` (``canary``: a canary Deployment) among its namespace's ``groups``
    of pods (label set, pods), sorted by name, each with its node's pool."""
    selector = (w.get("spec") or {}).get("selector") or {}
    pods: list[PodState] = []
    for labels, members in groups:
        if canaries.selects(selector, labels, canary):
            pods.extend(members)
    pods = [dataclasses.replace(p, pool=pool_of.get(p.node)) if p.node else p for p in pods]
    pods.sort(key=lambda p: p.name)
    return tuple(pods)


def full_snapshot(now: float, raw_nodes: Iterable[Raw], raw_pods: Iterable[Raw],
                  raw_workloads: Iterable[tuple[str, Raw]],
                  keys: convert.LabelKeys) -> ClusterSnapshot:
    """Every node, pod and workload converted; ``raw_workloads`` are ``(kind, object)``."""
    pods_by_node: dict[str, list[PodState]] = {}
    groups: dict[str, dict[int, tuple[Mapping[str, str], list[PodState]]]] = {}
    for p in raw_pods:
        if not convert.running(p):
            continue
        state = convert.pod_state(p)
        labels = p["metadata"].get("labels") or {}
        ns_groups = groups.setdefault(convert.namespace_of(p), {})
        entry = ns_groups.get(id(labels))
        if entry is None:
            entry = ns_groups[id(labels)] = (labels, [])
        entry[1].append(state)
        if state.node:
            pods_by_node.setdefault(state.node, []).append(state)

    nodes = tuple(sorted(
        (convert.node_state(n, keys, *convert.allocated(
            pods_by_node.get(convert.node_name(n), ()))) for n in raw_nodes),
        key=lambda n: n.name))
    pool_of = {n.name: n.pool for n in nodes}
    raw_workloads, raw_canaries = canaries.split(raw_workloads)

    def pods_of(w: Raw, canary: bool) -> tuple[PodState, ...]:
        return _pods_of(groups.get(convert.namespace_of(w), {}).values(), pool_of, w, canary)

    workloads: dict[str, WorkloadState] = {}
    for key, kind, w in effective_workloads(raw_workloads):
        meta = w["metadata"]
        canary = raw_canaries.get(key)
        workloads[key] = WorkloadState(
            str(meta.get("namespace")), str(meta["name"]), convert.workload_config(w, keys),
            pods_of(w, False), kind=kind,
            canary=None if canary is None else CanaryState(
                convert.workload_config(canary[1], keys), pods_of(canary[1], True)))
    return ClusterSnapshot(now, nodes, workloads)
