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
"""

from __future__ import annotations

from planner.domain.state import WorkloadState

DEFAULT_INTERVAL_S = 300.0


class PodDetailSampler:
    def __init__(self, min_interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.min_interval_s = min_interval_s
        self._last: dict[str, tuple[int, float]] = {}

    def wants(self, intent: str, workload: WorkloadState, now: float) -> bool:
        """Whether ``intent``'s event at ``now`` carries every pod (and, if so, remember it)."""
        fingerprint = hash(tuple((p.name, p.node, p.ready, p.restarts, p.cpu, p.device)
                                 for p in workload.pods))
        last = self._last.get(intent)
        if last is not None and (last[0] == fingerprint or now - last[1] < self.min_interval_s):
            return False
        self._last[intent] = (fingerprint, now)
        return True

    def forget(self, intents: set[str]) -> None:
        """Drop what is remembered of intents other than ``intents`` (deleted ones)."""
        for key in [k for k in self._last if k not in intents]:
            del self._last[key]
