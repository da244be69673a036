"""The cluster snapshot kept up to date from changes, instead of rebuilt from every object.

:class:`SnapshotBuilder` holds what :func:`planner.k8s.snapshot_full.full_snapshot` computes
from scratch, and each cycle applies only what changed:

* **pods** arrive as net changes (:mod:`planner.k8s.changefeed`); only those are converted
  (:func:`planner.k8s.convert.pod_state`). Running pods are grouped by namespace and label set
  (the pods of one ReplicaSet share a group); each group knows the workloads whose selector
  matches it, and each workload its groups. A pod whose labels or namespace change moves group;
  a new group is matched against the workloads of its namespace once;
* **nodes** and **workloads** (thousands, not hundreds of thousands) are listed every cycle and
  compared with the previous objects by identity (the watch cache stores a new projection when
  an object changes). A changed node is converted again; when its pool changes (or it appears
  or goes), the pods on it get their new pool. A node's allocation is summed again when the
  pods bound to it changed. A workload whose selector changed is matched again against the
  groups of its namespace;
* a workload's :class:`~planner.domain.state.WorkloadState` is rebuilt only when its config,
  kind or set of pods changed, or one of its pods did (its pods sorted by name, as the full
  snapshot does), or its canary Deployment did (:mod:`planner.k8s.canary`: kept like a
  workload whose pods are the ones carrying the canary label, under a key of its own, and
  shown as the workload's ``canary``); otherwise the previous object is reused. The node tuple
  is rebuilt only when a node changed.

The result equals :func:`~planner.k8s.snapshot_full.full_snapshot` over the same objects, field
for field and in the same order (a property test checks it over random sequences of changes).
The builder keeps only derived values and references to the cache's objects: a cache that
saves work, with nothing that matters for planning across restarts. Not thread-safe: one
builder per observing backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from planner.domain.state import (
    CanaryState,
    ClusterSnapshot,
    NodeState,
    PodState,
    WorkloadConfig,
    WorkloadState,
)
from planner.k8s import canary as canaries
from planner.k8s import convert
from planner.k8s.snapshot_full import effective_workloads

Raw = Mapping[str, Any]
Key = tuple[str | None, str]
LabelSet = frozenset[tuple[str, str]]

_by_name = attrgetter("name")

_SCALE = 2**1074
"""Every finite float times this is an integer: a node's CPU allocated is kept as an exact
integer sum and divided back (correctly rounded, as :func:`math.fsum`) when it is read."""
_EXACT: dict[float, int] = {}


def _exact(value: float) -> int:
    out = _EXACT.get(value)
    if out is None:
        num, den = value.as_integer_ratio()
        out = num * (_SCALE // den)
        if len(_EXACT) >= 4096:
            _EXACT.clear()
        _EXACT[value] = out
    return out


def _index_pair(selector: Mapping[str, Any]) -> tuple[str, str] | None:
    """One ``matchLabels`` pair every pod the selector matches has (``None`` if it has none)."""
    match = selector.get("matchLabels")
    if isinstance(match, Mapping):
        for k, v in sorted(match.items(), key=lambda kv: str(kv[0])):
            if isinstance(k, str) and isinstance(v, str):
                return k, v
    return None


class _Group:
    """The running pods of one namespace with one label set, and the workloads selecting them."""

    __slots__ = ("label_set", "labels", "namespace", "pods", "workloads")

    def __init__(self, namespace: str, label_set: LabelSet, labels: Mapping[str, str]) -> None:
        self.namespace = namespace
        self.label_set = label_set
        self.labels = labels
        self.pods: dict[Key, PodState] = {}
        self.workloads: set[str] = set()


def _canary_key(owner: str) -> str:
    """The builder's key for the canary Deployment of workload ``owner`` (``#`` is in no
    Kubernetes name, so it is no workload's key)."""
    return f"{owner}#canary"


class _Workload:
    """A workload, or a canary Deployment (``owner``: the key of its workload)."""

    __slots__ = ("config", "groups", "key", "kind", "name", "namespace", "owner", "raw",
                 "selector", "state")

    def __init__(self, key: str, kind: str, raw: Raw, keys: convert.LabelKeys,
                 owner: str | None = None) -> None:
        self.key = key
        self.owner = owner
        self.groups: set[_Group] = set()
        self.state: WorkloadState | None = None
        self.set(kind, raw, keys)

    def set(self, kind: str, raw: Raw, keys: convert.LabelKeys) -> None:
        meta = raw["metadata"]
        self.kind = kind
        self.raw = raw
        self.namespace = convert.namespace_of(raw)
        self.selector: Mapping[str, Any] = (raw.get("spec") or {}).get("selector") or {}
        self.name = (str(meta.get("namespace")), str(meta["name"]))
        self.config: WorkloadConfig = convert.workload_config(raw, keys)


def _pods(w: _Workload) -> tuple[PodState, ...]:
    """The workload's pods, sorted by name (as the full snapshot has them)."""
    pods: list[PodState] = [p for g in w.groups for p in g.pods.values()]
    pods.sort(key=_by_name)
    return tuple(pods)


@dataclasses.dataclass
class BuildCounts:
    """What the last :meth:`SnapshotBuilder.update` did (for tests and benchmarks)."""

    pods_converted: int = 0
    nodes_converted: int = 0
    workloads_rebuilt: int = 0
    selector_checks: int = 0


class SnapshotBuilder:
    """The incremental snapshot; see the module doc."""

    def __init__(self, keys: convert.LabelKeys | None = None) -> None:
        self.keys = keys or convert.LabelKeys()
        self._pod_group: dict[Key, _Group] = {}
        self._groups: dict[str, dict[LabelSet, _Group]] = {}
        self._node_pods: dict[str, set[Key]] = {}
        """Running pods bound to each node name (whether the node exists or not)."""
        self._node_alloc: dict[str, tuple[int, int]] = {}
        """Their CPU requests (an exact integer sum, see :data:`_SCALE`) and GPUs, per node."""
        self._node_raw: dict[str, Raw] = {}
        self._node_states: dict[str, NodeState] = {}
        self._pool_of: dict[str, str] = {}
        self._node_order: tuple[str, ...] = ()
        self._nodes: tuple[NodeState, ...] = ()
        self._nodes_stale = False
        self._workloads: dict[str, _Workload] = {}
        self._group_index: dict[str, dict[tuple[str, str], set[_Group]]] = {}
        """Groups by namespace and one of their labels."""
        self._workload_index: dict[str, dict[tuple[str, str] | None, set[str]]] = {}
        """Workloads by namespace and one pair of their ``matchLabels`` (``None``: none)."""
        self._dirty_workloads: set[str] = set()
        self._dirty_nodes: set[str] = set()
        self.counts = BuildCounts()
        self.totals = BuildCounts()

    # ------------------------------------------------------------------ one cycle
    def update(self, now: float, pod_changes: Mapping[Key, Raw | None],
               raw_nodes: Iterable[Raw],
               raw_workloads: Iterable[tuple[str, Raw]]) -> ClusterSnapshot:
        """Apply the pods changed since the last update (``None``: deleted or to be forgotten),
        compare the current nodes and workloads, and return the snapshot."""
        self.counts = BuildCounts()
        self._update_nodes(raw_nodes)
        for key, raw in pod_changes.items():
            self._pod(key, raw)
        self._rebuild_nodes()
        workloads = self._update_workloads(raw_workloads)
        c, t = self.counts, self.totals
        for f in dataclasses.fields(BuildCounts):
            setattr(t, f.name, getattr(t, f.name) + getattr(c, f.name))
        return ClusterSnapshot(now, self._nodes, workloads)

    # ------------------------------------------------------------------ pods
    def _pod(self, key: Key, raw: Raw | None) -> None:
        if raw is None or not convert.running(raw):
            self._remove_pod(key)
            return
        self.counts.pods_converted += 1
        state = convert.pod_state(raw, self._pool_of)
        labels: Mapping[str, str] = raw["metadata"].get("labels") or {}
        namespace = convert.namespace_of(raw)
        label_set: LabelSet = frozenset(labels.items())
        group = self._pod_group.get(key)
        if group is None or group.namespace != namespace or group.label_set != label_set:
            self._remove_pod(key)
            group = self._group(namespace, label_set, labels)
            self._pod_group[key] = group
            old = None
        else:
            old = group.pods[key]
            if old == state:
                return  # nothing the snapshot shows changed (a new resourceVersion only)
        group.pods[key] = state
        self._dirty_workloads.update(group.workloads)
        if old is not None and old.node:
            self._unbind(key, old)
        if state.node:
            self._bind(key, state)

    def _bind(self, key: Key, state: PodState) -> None:
        node = str(state.node)
        self._node_pods.setdefault(node, set()).add(key)
        cpu, gpus = self._node_alloc.get(node, (0, 0))
        self._node_alloc[node] = (cpu + _exact(state.cpu), gpus + (state.device == "gpu"))
        self._dirty_nodes.add(node)

    def _unbind(self, key: Key, state: PodState) -> None:
        node = str(state.node)
        on_node = self._node_pods[node]
        on_node.discard(key)
        if not on_node:
            del self._node_pods[node]
            del self._node_alloc[node]
        else:
            cpu, gpus = self._node_alloc[node]
            self._node_alloc[node] = (cpu - _exact(state.cpu), gpus - (state.device == "gpu"))
        self._dirty_nodes.add(node)

    def _remove_pod(self, key: Key) -> None:
        group = self._pod_group.pop(key, None)
        if group is None:
            return
        state = group.pods.pop(key)
        self._dirty_workloads.update(group.workloads)
        if not group.pods:
            self._drop_group(group)
        if state.node:
            self._unbind(key, state)

    def _group(self, namespace: str, label_set: LabelSet, labels: Mapping[str, str]) -> _Group:
        ns_groups = self._groups.setdefault(namespace, {})
        group = ns_groups.get(label_set)
        if group is not None:
            return group
        group = ns_groups[label_set] = _Group(namespace, label_set, labels)
        by_label = self._group_index.setdefault(namespace, {})
        for pair in label_set:
            by_label.setdefault(pair, set()).add(group)
        index = self._workload_index.get(namespace)
        if index:
            candidates: set[str] = set(index.get(None, ()))
            for pair in label_set:
                candidates.update(index.get(pair, ()))
            for wkey in candidates:
                w = self._workloads[wkey]
                self.counts.selector_checks += 1
                if canaries.selects(w.selector, labels, w.owner is not None):
                    group.workloads.add(wkey)
                    w.groups.add(group)
        return group

    def _drop_group(self, group: _Group) -> None:
        for w in group.workloads:
            self._workloads[w].groups.discard(group)
        ns_groups = self._groups[group.namespace]
        del ns_groups[group.label_set]
        if not ns_groups:
            del self._groups[group.namespace]
        by_label = self._group_index[group.namespace]
        for pair in group.label_set:
            members = by_label[pair]
            members.discard(group)
            if not members:
                del by_label[pair]
        if not by_label:
            del self._group_index[group.namespace]

    # ------------------------------------------------------------------ nodes
    def _update_nodes(self, raw_nodes: Iterable[Raw]) -> None:
        """Take the current nodes: changed ones to convert again, pools to pass to pods."""
        current: dict[str, Raw] = {}
        old_raw = self._node_raw
        membership = False
        for n in raw_nodes:
            name = convert.node_name(n)
            current[name] = n
            if old_raw.get(name) is not n:
                self._dirty_nodes.add(name)
                membership = membership or name not in old_raw
                pool = convert.node_pool(n, self.keys)
                if self._pool_of.get(name) != pool:
                    self._repool(name, pool)
        for name in [name for name in old_raw if name not in current]:
            membership = True
            self._node_states.pop(name, None)
            self._repool(name, None)
        self._node_raw = current
        if membership:
            self._node_order = tuple(sorted(current))
            self._nodes_stale = True

    def _rebuild_nodes(self) -> None:
        """Convert the nodes that changed or whose pods did; the node tuple if any did."""
        current = self._node_raw
        rebuilt = False
        for name in self._dirty_nodes:
            raw = current.get(name)
            if raw is None:
                continue
            self.counts.nodes_converted += 1
            cpu, gpus = self._node_alloc.get(name, (0, 0))
            self._node_states[name] = convert.node_state(raw, self.keys, cpu / _SCALE, gpus)
            rebuilt = True
        if rebuilt or self._nodes_stale:
            states = self._node_states
            self._nodes = tuple(states[name] for name in self._node_order)
        self._dirty_nodes = set()
        self._nodes_stale = False

    def _repool(self, node: str, pool: str | None) -> None:
        """Give the pods on ``node`` its new pool (``None``: the node is gone)."""
        if pool is None:
            self._pool_of.pop(node, None)
        else:
            self._pool_of[node] = pool
        for key in self._node_pods.get(node, ()):
            group = self._pod_group[key]
            group.pods[key] = dataclasses.replace(group.pods[key], pool=pool)
            self._dirty_workloads.update(group.workloads)

    # ------------------------------------------------------------------ workloads
    def _update_workloads(self, raw_workloads: Iterable[tuple[str, Raw]]
                          ) -> dict[str, WorkloadState]:
        plain, by_owner = canaries.split(raw_workloads)
        effective = effective_workloads(plain)
        entries: list[tuple[str, str, Raw, str | None]] = [
            (key, kind, raw, None) for key, kind, raw in effective]
        entries += [(_canary_key(owner), kind, raw, owner)
                    for owner, (kind, raw) in by_owner.items()]
        keep = {key for key, _, _, _ in entries}
        for key in [k for k in self._workloads if k not in keep]:
            self._drop_workload(key)
        for key, kind, raw, owner in entries:
            self._set_workload(key, kind, raw, owner)
        out: dict[str, WorkloadState] = {}
        dirty = self._dirty_workloads
        dirty.update([owner for key in dirty if (owner := self._owner(key)) is not None])
        for key, _, _ in effective:
            w = self._workloads[key]
            if w.state is None or key in dirty:
                w.state = self._workload_state(w)
            out[key] = w.state
        self._dirty_workloads = set()
        return out

    def _owner(self, key: str) -> str | None:
        w = self._workloads.get(key)
        return None if w is None else w.owner

    def _set_workload(self, key: str, kind: str, raw: Raw, owner: str | None) -> None:
        w = self._workloads.get(key)
        if w is None:
            w = self._workloads[key] = _Workload(key, kind, raw, self.keys, owner)
            self._match(w)
            return
        if w.raw is raw and w.kind == kind:
            return
        before = (w.kind, w.name, w.config, w.namespace, w.selector)
        w.set(kind, raw, self.keys)
        if (w.namespace, w.selector) != before[3:]:
            self._unmatch(w, before[3], before[4])
            self._match(w)
        elif (w.kind, w.name, w.config) != before[:3]:
            self._dirty_workloads.add(key)

    def _match(self, w: _Workload) -> None:
        index = self._workload_index.setdefault(w.namespace, {})
        pair = _index_pair(w.selector)
        index.setdefault(pair, set()).add(w.key)
        if pair is None:
            candidates: Iterable[_Group] = self._groups.get(w.namespace, {}).values()
        else:
            candidates = self._group_index.get(w.namespace, {}).get(pair, ())
        for group in candidates:
            self.counts.selector_checks += 1
            if canaries.selects(w.selector, group.labels, w.owner is not None):
                group.workloads.add(w.key)
                w.groups.add(group)
        self._dirty_workloads.add(w.key)

    def _unmatch(self, w: _Workload, namespace: str, selector: Mapping[str, Any]) -> None:
        for group in w.groups:
            group.workloads.discard(w.key)
        w.groups = set()
        index = self._workload_index.get(namespace, {})
        pair = _index_pair(selector)
        members = index.get(pair)
        if members is not None:
            members.discard(w.key)
            if not members:
                del index[pair]
        if not index:
            self._workload_index.pop(namespace, None)

    def _drop_workload(self, key: str) -> None:
        w = self._workloads.pop(key)
        self._unmatch(w, w.namespace, w.selector)
        self._dirty_workloads.discard(key)
        if w.owner is not None:
            self._dirty_workloads.add(w.owner)

    def _workload_state(self, w: _Workload) -> WorkloadState:
        self.counts.workloads_rebuilt += 1
        c = self._workloads.get(_canary_key(w.key))
        canary = None if c is None else CanaryState(c.config, _pods(c))
        return WorkloadState(w.name[0], w.name[1], w.config, _pods(w), kind=w.kind,
                             canary=canary)

    # ------------------------------------------------------------------ introspection
    def pods_known(self) -> int:
        return len(self._pod_group)

    def nodes(self) -> Sequence[NodeState]:
        return self._nodes
