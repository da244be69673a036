"""What changed in one resource of the watch cache since the last look, without listing it.

:class:`ChangeFeed` subscribes to the cache (:meth:`planner.k8s.watchcache.WatchCache.subscribe`,
no replay) and turns the events queued since the previous :meth:`ChangeFeed.poll` into the net
change per object: ``{key: object}`` for an object added or modified, ``{key: None}`` for one
deleted. The cache replaces an object's projection whenever it changes, so an event carrying the
projection the feed already knows is no change and is dropped.

The first poll, and any poll after the subscription overflowed (a ``RESYNC`` event: the consumer
fell too far behind), lists the resource and compares every object with the known one by
identity instead: the subscription is opened before that list, so nothing is lost between them,
and events queued meanwhile are replayed harmlessly at the next poll (objects already known).

Only the last objects seen are kept (references into the cache, which stores them anyway): a
cache that saves work, nothing that matters across restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.k8s.resources import ResourceType
from planner.k8s.watchcache import RESYNC, Key, Subscription, WatchCache, key_of

Changes = dict[Key, Mapping[str, Any] | None]
"""Net changes: the new object per key, ``None`` for a deleted one."""


class ChangeFeed:
    """Net changes of one resource type between polls; see the module doc."""

    def __init__(self, cache: WatchCache, rtype: ResourceType) -> None:
        self.cache = cache
        self.rtype = rtype
        self.known: dict[Key, Mapping[str, Any]] = {}
        self._sub: Subscription | None = None
        self.resyncs = 0
        """Full comparisons made (the first poll and one per overflow)."""

    def poll(self, wait: float | None = None) -> Changes:
        """The changes since the last poll; :class:`planner.k8s.watchcache.NotReady` before
        the resource's initial list is in (after waiting ``wait`` seconds for it)."""
        if self._sub is None:
            if not self.cache.ready(self.rtype):
                self.cache.list(self.rtype, wait=wait)  # raises NotReady, or it is ready now
            self._sub = self.cache.subscribe(self.rtype, replay=False)
            return self._resync(wait)
        events = self._sub.drain()
        if any(ev.type == RESYNC for ev in events):
            return self._resync(wait)
        changes: Changes = {}
        known = self.known
        for ev in events:
            key = key_of(ev.object)
            if ev.type == "DELETED":
                if known.pop(key, None) is not None or key in changes:
                    changes[key] = None
            elif known.get(key) is not ev.object:
                known[key] = ev.object
                changes[key] = ev.object
        return changes

    def _resync(self, wait: float | None) -> Changes:
        assert self._sub is not None
        self._sub.drain()
        self.resyncs += 1
        current: dict[Key, Mapping[str, Any]] = {
            key_of(o): o for o in self.cache.list(self.rtype, wait=wait)}
        old = self.known
        changes: Changes = {k: o for k, o in current.items() if old.get(k) is not o}
        for k in old.keys() - current.keys():
            changes[k] = None
        self.known = current
        return changes

    def close(self) -> None:
        if self._sub is not None:
            self._sub.close()
            self._sub = None
