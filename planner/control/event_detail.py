"""When an intent's event carries every pod (issue 13: compact events).

Events always summarise the pods per pool, device, size and readiness
(:func:`planner.domain.events.pod_groups`): a few hundred bytes whatever the replicas. The full
list of pods and hosting nodes, tens of kilobytes for a few hundred pods, is added when the
intent's pods changed (created, deleted, moved, resized, readiness or restarts) since the last
event that carried them, and at most every ``min_interval_s`` per intent: a workload that churns
every cycle is sampled, a steady one costs nothing. The first event of each intent after a
(re)start carries them.

What it remembers is what was recorded (a fingerprint and a time per intent): losing it on a
restart only makes the next event detailed; planning never reads it.

Intents started together would otherwise stay in step: every ``min_interval_s`` all of them
would carry their pods in the same cycle (at 1,000 intents, a thousand detailed events in one
cycle and none in the next nineteen). So the interval after an intent's first detailed event
is lengthened by a part of itself taken from the intent's name, and the detailed events of many
intents spread evenly over the cycles.
"""

from __future__ import annotations

import zlib

from planner.domain.state import WorkloadState

DEFAULT_INTERVAL_S = 300.0


class PodDetailSampler:
    def __init__(self, min_interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.min_interval_s = min_interval_s
        self._last: dict[str, tuple[int, float]] = {}

    def wants(self, intent: str, workload: WorkloadState, now: float) -> bool:
        """Whether ``intent``'s event at ``now`` carries every pod (and, if so, remember it)."""
        last = self._last.get(intent)
        if last is not None and now - last[1] < self.min_interval_s:
            return False        # (before the fingerprint: a pass over every pod)
        fingerprint = hash(tuple((p.name, p.node, p.ready, p.restarts, p.cpu, p.device)
                                 for p in workload.pods))
        if last is not None and last[0] == fingerprint:
            return False
        self._last[intent] = (fingerprint, now if last is not None else now + self.phase(intent))
        return True

    def phase(self, intent: str) -> float:
        """Where in the interval ``intent``'s detailed events fall: a fraction of it taken from
        a stable hash of the name (the same in every process)."""
        return (zlib.crc32(intent.encode()) % 1000) / 1000.0 * self.min_interval_s

    def forget(self, intents: set[str]) -> None:
        """Drop what is remembered of intents other than ``intents`` (deleted ones)."""
        for key in [k for k in self._last if k not in intents]:
            del self._last[key]
