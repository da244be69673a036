"""The simulated scheduler's node choice in logarithmic time.

The rule (unchanged): among the nodes a pod may use (its pinned pool, if any; a node pool with
GPUs for a GPU pod) and that have room for it, the node with the most free CPU, the first in
node order among equals. Scanning every node for every pod made building a cluster of 10,000
nodes and 10,000 pods take 141 s. Here each eligible set (all nodes, a pool's, the GPU pools'
nodes, a GPU pool's) keeps a heap of ``(-free CPU, node index)``; an allocation change pushes
the node's new entry and leaves the old one to be skipped when it surfaces (lazy deletion). The
top valid entry has the most free CPU: if the pod's CPU does not fit there, it fits nowhere.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Protocol


class PoolLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def cpu(self) -> float: ...
    @property
    def gpus(self) -> int: ...


class NodeLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def pool(self) -> PoolLike: ...
    @property
    def cpu_allocated(self) -> float: ...

    def fits(self, cpu: float, gpus: int) -> bool: ...


Entry = tuple[float, int]


def free_cpu(node: NodeLike) -> float:
    return node.pool.cpu - node.cpu_allocated


class NodeIndex:
    """Heaps of the nodes by free CPU, per eligible set (see the module docstring)."""

    def __init__(self, nodes: Sequence[NodeLike]) -> None:
        self.nodes = nodes
        self._pos = {n.name: i for i, n in enumerate(nodes)}   # names survive a deep copy
        self._heaps: dict[tuple[str | None, bool], list[Entry]] = {}
        self._member: list[list[tuple[str | None, bool]]] = []
        for n in nodes:
            keys: list[tuple[str | None, bool]] = [(None, False), (n.pool.name, False)]
            if n.pool.gpus > 0:
                keys += [(None, True), (n.pool.name, True)]
            self._member.append(keys)
        self._rebuild()

    def _rebuild(self) -> None:
        self._heaps = {}
        for i, n in enumerate(self.nodes):
            for key in self._member[i]:
                self._heaps.setdefault(key, []).append((-free_cpu(n), i))
        for heap in self._heaps.values():
            heapq.heapify(heap)

    def changed(self, node: NodeLike) -> None:
        """``node``'s allocation changed."""
        i = self._pos[node.name]
        entry = (-free_cpu(node), i)
        for key in self._member[i]:
            heapq.heappush(self._heaps[key], entry)
        if sum(len(h) for h in self._heaps.values()) > 8 * (len(self.nodes) + 16):
            self._rebuild()                       # too many stale entries

    def pick(self, pool: str | None, cpu: float, gpus: int) -> NodeLike | None:
        """The node the rule chooses for a pod of ``cpu`` cores and ``gpus`` GPUs pinned to
        ``pool`` (``None``: anywhere), or ``None`` if none has room."""
        heap = self._heaps.get((pool, gpus > 0))
        if not heap:
            return None
        passed: list[Entry] = []
        found = None
        while heap:
            neg_free, i = heap[0]
            node = self.nodes[i]
            if -neg_free != free_cpu(node):
                heapq.heappop(heap)               # stale: the node changed since
                continue
            if -neg_free < cpu - 1e-9:
                break                             # the most free CPU is not enough
            if node.fits(cpu, gpus):
                found = node
                break
            passed.append(heapq.heappop(heap))   # room for the CPU, not for the GPUs
        for entry in passed:
            heapq.heappush(heap, entry)
        return found
