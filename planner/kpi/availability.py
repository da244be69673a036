"""Availability from pod restarts, for workloads without request metrics (IDO-style).

Per pod ``i`` with ``r_i`` restarts and uptime ``u_i = now - started_at``:
``MTBF_i = u_i / max(r_i, 1)`` and ``a_i = MTBF_i / (MTBF_i + MTTR)`` when ``r_i > 0``,
``a_i = 1.0`` for a pod that never restarted. The workload is available when at least one
ready pod is (pods as redundant replicas): ``A = 1 - prod(1 - a_i)`` over ready pods, and
``A = 0`` with no ready pod. Pure functions; the result is always within ``[0, 1]`` and never
increases when a pod's restart count grows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from planner.domain.state import PodState

DEFAULT_MTTR = 30.0
"""Assumed mean time to repair (seconds): how long a restart makes a pod unavailable."""


def pod_availability(pod: PodState, now: float, mttr: float = DEFAULT_MTTR) -> float:
    """``MTBF / (MTBF + MTTR)`` for a pod with restarts, 1.0 for a pod without."""
    if not mttr >= 0 or math.isinf(mttr):
        raise ValueError(f"mttr must be a finite number >= 0, got {mttr!r}")
    if pod.restarts <= 0 or mttr == 0.0:
        return 1.0
    uptime = max(now - pod.started_at, 0.0)
    if not math.isfinite(uptime):
        raise ValueError(f"uptime is not finite (now={now!r}, started_at={pod.started_at!r})")
    mtbf = uptime / max(pod.restarts, 1)
    if mtbf <= 0.0:
        return 0.0
    # MTBF / (MTBF + MTTR) written as a chain of monotone float operations, so that more
    # restarts or a longer MTTR can never raise the result through rounding
    return min(max(1.0 / (1.0 + mttr / mtbf), 0.0), 1.0)


def workload_availability(
    pods: Iterable[PodState], now: float, mttr: float = DEFAULT_MTTR
) -> float:
    """``1 - prod(1 - a_i)`` over ready pods; 0.0 when no pod is ready."""
    unavailable = 1.0
    any_ready = False
    for pod in pods:
        if not pod.ready:
            continue
        any_ready = True
        unavailable *= 1.0 - pod_availability(pod, now, mttr)
    if not any_ready:
        return 0.0
    return min(max(1.0 - unavailable, 0.0), 1.0)
