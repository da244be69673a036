"""Which changes of a workload's configuration restart its pods: the disruption the planners
weigh (``admin.utility.disruption`` per restarting change).

A change of device or node pool replaces every pod (a rolling update: new pods start, the old
ones leave). A change of CPU size does too, unless the cluster resizes running pods in place
(:attr:`planner.domain.state.ClusterSnapshot.in_place_resize`, Kubernetes >= 1.33): then a
CPU change *alone* restarts nothing (the pods keep running at the new size after a short
delay; a resize the node has no room for waits and, past a limit, falls back to replacing
the pod, which the disruption weight does not price in advance). A CPU change that comes with
a device or pool change is still counted: those pods are replaced anyway, and the count stays
what it was without in-place resize.
"""

from __future__ import annotations

import numpy as np

from planner.domain.state import WorkloadConfig
from planner.models.predictor import CandidateBatch, FloatArray

RESTARTING_KNOBS = frozenset({"cpu", "device", "pool"})
"""Knobs whose change replaces pods by a rolling update (CPU: unless resized in place)."""


def restarts(current: WorkloadConfig, cfg: WorkloadConfig, in_place: bool) -> int:
    """The restarting knobs ``cfg`` changes from ``current`` (0-3; ``in_place``: the
    cluster resizes running pods in place, so the CPU size alone counts none)."""
    device = int(cfg.device != current.device)
    pool = int(cfg.pool != current.pool)
    cpu = int(cfg.cpu != current.cpu and not (in_place and device + pool == 0))
    return cpu + device + pool


def batch_restarts(batch: CandidateBatch, current: WorkloadConfig, in_place: bool
                   ) -> FloatArray:
    """:func:`restarts` of every row of ``batch`` (a row's pool counts as changed where it is
    not ``current``'s, as :meth:`CandidateBatch.in_pool` says)."""
    cpu = (batch.cpu != current.cpu).astype(float)
    device = (batch.gpu != (1.0 if current.device == "gpu" else 0.0)).astype(float)
    pool = (~batch.in_pool(current.pool)).astype(float)
    if in_place:
        cpu = np.where(device + pool > 0, cpu, 0.0)
    out: FloatArray = cpu + device + pool
    return out
