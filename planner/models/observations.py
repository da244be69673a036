"""Training rows from ``events``: one row per event whose configuration had settled.

An event is usable when every desired pod was ready, the configuration had not changed for at
least ``settle_s`` (the KPI window sees only that configuration) and the KPI was known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.domain import events as event_docs

FEATURES = ("rate", "replicas", "cpu", "gpu", "pool")
"""Leading columns of the feature matrix; ``pool`` is an integer code (-1: no pool pinned).
The node-class share columns follow (see :func:`feature_names`)."""
UNKNOWN_CLASS = ""
"""Node class of pods whose node pool is not known."""


def feature_names(classes: Sequence[str]) -> list[str]:
    """All columns: :data:`FEATURES`, then the share of the pods on each node class."""
    return [*FEATURES, *(f"share:{c}" for c in classes)]


@dataclass(frozen=True)
class Dataset:
    X: NDArray[np.float64]
    y: NDArray[np.float64]
    pools: tuple[str, ...]
    """Pinned pools, in the order of the ``pool`` codes."""
    classes: tuple[str, ...]
    """Node classes (node pools the pods ran on), in the order of the share columns."""
    times: NDArray[np.float64]
    utilization: NDArray[np.float64]
    """Mean utilisation of the pods' serving devices (NaN: unknown), to tell saturated rows
    apart."""
    window_utilization: NDArray[np.float64] | None = None
    """The highest CPU utilisation of any event (settled or not) whose measurements may
    overlap the row's KPI window, ``inf`` when the next event is not known yet (see
    :func:`window_peaks`); ``None``: :attr:`utilization`."""
    device_utilization: NDArray[np.float64] | None = None
    """Mean utilisation of the devices that serve the row's requests, where it measures their
    service (the utilisation law: arrivals over service rate): a GPU row's only where the
    event recorded its GPUs' utilisation (``load.utilization``), NaN otherwise (a GPU pod's
    CPU utilisation says nothing of its GPU); ``None``: :attr:`utilization`."""

    @property
    def service_utilization(self) -> NDArray[np.float64]:
        """:attr:`device_utilization`, else :attr:`utilization`."""
        return self.utilization if self.device_utilization is None else self.device_utilization

    def __len__(self) -> int:
        return int(self.y.size)


def pool_code(pool: str | None, pools: Sequence[str]) -> float:
    if pool is None:
        return -1.0
    return float(pools.index(pool)) if pool in pools else -2.0


def settled(events: Sequence[Mapping[str, Any]], settle_s: float = 60.0) -> list[Mapping[str, Any]]:
    """Events (oldest first) whose configuration had been stable for ``settle_s`` (the KPI
    window), with no pod of another shape serving in that time.

    The time counts from the configuration's change, or from the first event after it at
    which no pod of another shape (an old pod of a rollout, a canary) was ready, whichever is
    later: a rollout to slower pods that takes a start-up of 80 s would otherwise end with a
    KPI window in which the old, faster pods still served, and the new shape would be credited
    with their latency (seen on gen-2173: eleven CPU pods at 5.6 ms where one GPU pod had
    served). Pods of the configuration's own shape still starting (a scale-out) do not restart
    the time: that window is the same shape at fewer pods, a pessimistic row. (Restarting it
    there too took the bursty gen-26 from 32 to 69 violation-minutes: the model learned the
    scaled-out fleet without its saturated minutes, and bursts met fewer pods;
    docs/benchmarks.md section 41.)"""
    out: list[Mapping[str, Any]] = []
    since: float | None = None
    last_cfg: Any = None
    for ev in sorted(events, key=lambda e: float(e["time"])):
        cfg = ev.get("config")
        t = float(ev["time"])
        if cfg != last_cfg:
            since, last_cfg = t, cfg
        if not isinstance(cfg, Mapping):
            continue
        groups = ready_groups(ev)
        if ev.get("canary") or (groups is not None and not _pods_of(groups, cfg)):
            since = None                  # another shape serves: counted again from the next
            continue
        if since is None:
            since = t
        res = ev.get("resources") or {}
        ready = res.get("ready_replicas")
        if ready is not None and ready != cfg.get("replicas"):
            continue
        if groups is not None and sum(n for _, n in groups) != cfg.get("replicas"):
            continue
        if t - since < settle_s and not ev.get("characterization"):
            continue
        out.append(ev)
    return out


def ready_groups(ev: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], int]] | None:
    """The event's ready pods as (pod fields, how many) from its ``pod_groups`` (or, in events
    recorded before those, its ``pods``); ``None`` when it records no pods."""
    groups = event_docs.records(ev.get("pod_groups"))
    if groups:
        return [(g, int(g.get("count") or 0)) for g in groups if g.get("ready")]
    pods = event_docs.records(ev.get("pods"))
    if pods:
        return [(p, 1) for p in pods if p.get("ready")]
    return None


def _pods_of(ready: list[tuple[Mapping[str, Any], int]], cfg: Mapping[str, Any]) -> bool:
    """Every ready pod runs the configuration's shape (CPU size, device, pool)."""
    want_pool = cfg.get("pool")
    return all(
        p.get("cpu") == cfg.get("cpu") and p.get("device", "cpu") == cfg.get("device", "cpu")
        and (want_pool is None or p.get("pool") in (None, want_pool))
        for p, _ in ready)


def node_mix(ev: Mapping[str, Any]) -> dict[str, float]:
    """Share of the event's ready pods per node pool; without pod details, the pinned pool
    (or :data:`UNKNOWN_CLASS`)."""
    counts: dict[str, float] = {}
    for p, n in ready_groups(ev) or ():
        key = str(p.get("pool") or UNKNOWN_CLASS)
        counts[key] = counts.get(key, 0.0) + n
    total = sum(counts.values())
    if total == 0:
        return {str((ev.get("config") or {}).get("pool") or UNKNOWN_CLASS): 1.0}
    return {k: v / total for k, v in counts.items()}


def _utilization(ev: Mapping[str, Any]) -> float:
    """How busy the event's pods were: the serving devices' utilisation where the event
    records one (GPU pods), else the CPU utilisation; NaN when unknown."""
    load = ev.get("load") or {}
    util = load.get("utilization")
    if util is None:
        util = load.get("cpu_utilization")
    return float(util) if util is not None else float("nan")


def _device_utilization(ev: Mapping[str, Any]) -> float:
    """How busy the devices serving the event's configuration were, where that measures their
    service: a GPU configuration's GPUs only where the event recorded their utilisation
    (``load.utilization``), NaN otherwise; any other configuration's as :func:`_utilization`."""
    if (ev.get("config") or {}).get("device") == "gpu":
        util = (ev.get("load") or {}).get("utilization")
        return float(util) if util is not None else float("nan")
    return _utilization(ev)


def window_peaks(times: NDArray[np.float64], at: NDArray[np.float64],
                 utils: NDArray[np.float64], window_s: float,
                 follows: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
    """For each time of ``times``: the highest utilisation of the events (``at``, sorted,
    with ``utils``) within ``window_s`` before it, at it, and the next one after it (NaN
    when none is known). ``follows``: per event, whether it came within ``window_s`` of the
    one before it; a next event that did not is left out (it tells nothing of the window's
    end), and a time with no next event yet gets ``inf`` (whether its window ended calm is
    not known yet).

    A KPI measured over a window (availability: the share of requests served in the last
    minute) counts every second of it, while a row's utilisation is a mean over a shorter
    window: a window in which the pods saturated for a while (the start-up of a scale-out's
    pods) can end calm, and a burst that begins in the last seconds of a window barely moves
    its mean; the next event shows it. Such a row's KPI carries the overload."""
    if not len(at) or not len(times):
        return np.full(len(times), np.nan if follows is None else np.inf)
    lo = np.searchsorted(at, times - window_s, side="right")
    nxt = np.searchsorted(at, times, side="right")
    has_next = nxt < len(at)
    use_next = has_next if follows is None else has_next & np.append(follows, False)[nxt]
    hi = np.where(use_next, nxt + 1, nxt)
    # One reduction over [lo, hi) per row (every other segment of the interleaved bounds;
    # fmax skips NaN), on the utilisations with a NaN appended: an empty span (lo == hi)
    # reads a single element, replaced by NaN below.
    padded = np.append(utils, np.nan)
    bounds = np.empty(2 * len(times), dtype=np.intp)
    bounds[0::2], bounds[1::2] = lo, hi
    out: NDArray[np.float64] = np.where(hi > lo, np.fmax.reduceat(padded, bounds)[0::2],
                                        np.nan)
    if follows is not None:
        out = np.where(has_next, out, np.inf)
    return out


def dataset(events: Iterable[Mapping[str, Any]], objective: str,
            settle_s: float = 60.0) -> Dataset:
    """Rows of (features, KPI value) for ``objective`` from ``events``."""
    rows: list[list[float]] = []
    ys: list[float] = []
    times: list[float] = []
    utils: list[float] = []
    served: list[float] = []
    every = sorted(events, key=lambda e: float(e["time"]))
    evs = settled(every, settle_s)
    pools = tuple(sorted({str(e["config"]["pool"]) for e in evs if e["config"].get("pool")}))
    mixes = [node_mix(ev) for ev in evs]
    classes = tuple(sorted({k for m in mixes for k in m}))
    for ev, mix in zip(evs, mixes, strict=True):
        value = (ev.get("current") or {}).get(objective)
        rate = (ev.get("load") or {}).get("request_rate")
        cfg = ev["config"]
        if value is None or rate is None or not np.isfinite(value) or rate <= 0:
            continue
        rows.append([float(rate), float(cfg["replicas"]), float(cfg["cpu"]),
                     1.0 if cfg.get("device") == "gpu" else 0.0,
                     pool_code(cfg.get("pool"), pools), *(mix.get(c, 0.0) for c in classes)])
        ys.append(float(value))
        times.append(float(ev["time"]))
        utils.append(_utilization(ev))
        served.append(_device_utilization(ev))
    X = np.asarray(rows, dtype=float).reshape(-1, len(FEATURES) + len(classes))
    t = np.asarray(times, dtype=float)
    at = np.asarray([float(e["time"]) for e in every], dtype=float)
    # Whether an event came within a KPI window of the one before it (whatever its
    # configuration: the planner's answer to a burst's first row is another configuration).
    follows = np.append(False, np.diff(at) <= settle_s)
    peaks = window_peaks(t, at, np.asarray([_utilization(e) for e in every], dtype=float),
                         settle_s, follows)
    return Dataset(X, np.asarray(ys, dtype=float), pools, classes, t,
                   np.asarray(utils, dtype=float), peaks, np.asarray(served, dtype=float))
