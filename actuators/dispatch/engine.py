"""The weight engine: one global view of all endpoints, a policy, and the guards around it.

:class:`WeightEngine` ingests :class:`~actuators.dispatch.metrics.EndpointMetrics` samples, asks its
:class:`~actuators.dispatch.base.WeightPolicy` for relative weights of the endpoints whose data can
be
trusted, and turns them into integer weights (HAProxy's 1..256) through guards that hold for every
policy:

* not ready -> weight 0; a ready endpoint never gets 0, unless the policy pins it away by its
  owner's rule (:attr:`~actuators.dispatch.base.Suggestion.pinned_away`, the ``manual``
  policy): its weight then falls to 0 within the change limits below (a new endpoint starts at
  0), it is left out of the minimum share, and the decision's status is ``pinned``. Pins that
  would leave no ready endpoint with a positive weight are ignored, with that reason;
* blackout: an endpoint with less than ``blackout_s`` of valid data gets the mean weight (not
  for a policy that judges by rules only: ``WeightPolicy.measures`` false);
* expiry: no valid sample for ``expiry_s`` -> mean weight (and a new blackout when data resumes);
* malformed sample (NaN, negative, out of range, a field the policy needs is missing) -> the
  endpoint keeps its last weight until its last valid data expires;
* minimum share: each ready endpoint keeps at least ``min_share`` of the total weight;
* rate limit: a weight moves at most ``max_relative_change`` of its value (at least 1) per update;
* hysteresis: a change smaller than ``change_threshold`` (relative) is not written.

Computed weights are scaled so that their mean is ``reference_weight``; "the mean weight" is that
value. Each decision carries a one-line reason. One engine instance is meant to be the single view
shared by every data plane the weights are rendered to.

An engine's memory is data: :meth:`WeightEngine.state` writes it down (per endpoint a few
numbers: readiness, weight, when its valid data began, its last valid sample and what was wrong
with a later one; and the policy's own state), :meth:`WeightEngine.restore` reads it back. An
engine restored from another's state, with the same policy and configuration, makes the same
updates from then on (the weights actuator keeps the state in the intent's memory and builds
its engine from it every cycle).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actuators.dispatch import base, metrics

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    blackout_s: float = 10.0
    expiry_s: float = 180.0
    min_share: float = 0.01
    max_relative_change: float = 0.5
    change_threshold: float = 0.05
    reference_weight: int = 64
    min_weight: int = 1
    max_weight: int = 256

    def __post_init__(self) -> None:
        if self.blackout_s < 0 or self.expiry_s <= 0:
            raise ValueError("need blackout_s >= 0 and expiry_s > 0")
        if not 0 <= self.min_share < 1:
            raise ValueError("min_share must be in [0, 1)")
        if self.max_relative_change <= 0 or self.change_threshold < 0:
            raise ValueError("need max_relative_change > 0 and change_threshold >= 0")
        if not 1 <= self.min_weight <= self.reference_weight <= self.max_weight:
            raise ValueError("need 1 <= min_weight <= reference_weight <= max_weight")


class Status(enum.StrEnum):
    COMPUTED = "computed"
    BLACKOUT = "blackout"
    EXPIRED = "expired"
    HELD = "held"
    NO_DATA = "no-data"
    NOT_READY = "not-ready"
    PINNED = "pinned"


@dataclasses.dataclass(frozen=True)
class Decision:
    """The outcome for one endpoint in one update."""

    endpoint_id: str
    weight: int
    previous: int | None
    target: float
    status: Status
    reason: str

    @property
    def changed(self) -> bool:
        return self.previous != self.weight


@dataclasses.dataclass(frozen=True)
class WeightUpdate:
    timestamp: float
    weights: Mapping[str, int]
    decisions: Mapping[str, Decision]

    @property
    def changes(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions.values() if d.changed)


@dataclasses.dataclass
class _Endpoint:
    ready: bool = False
    last_valid: metrics.EndpointMetrics | None = None
    valid_since: float | None = None
    problem: str | None = None
    weight: int | None = None

    def state(self) -> dict[str, Any]:
        """JSON-safe, unset fields left out."""
        out: dict[str, Any] = {"ready": self.ready}
        if self.weight is not None:
            out["weight"] = self.weight
        if self.valid_since is not None:
            out["since"] = self.valid_since
        if self.problem is not None:
            out["problem"] = self.problem
        if self.last_valid is not None:
            out["sample"] = metrics.sample_state(self.last_valid)
        return out

    @staticmethod
    def from_state(endpoint_id: str, state: object) -> _Endpoint:
        if not isinstance(state, Mapping):
            raise ValueError(f"endpoint {endpoint_id}: state must be a mapping")
        ready, weight = state.get("ready", False), state.get("weight")
        since, problem, sample = state.get("since"), state.get("problem"), state.get("sample")
        if not isinstance(ready, bool) or not (weight is None or _integer(weight)):
            raise ValueError(f"endpoint {endpoint_id}: ready must be a boolean, weight an integer")
        if not (since is None or _number(since)) or not (problem is None
                                                          or isinstance(problem, str)):
            raise ValueError(f"endpoint {endpoint_id}: since must be a number, problem a string")
        if sample is not None and not isinstance(sample, Mapping):
            raise ValueError(f"endpoint {endpoint_id}: sample must be a mapping")
        last = metrics.sample_from_state(endpoint_id, sample) if sample is not None else None
        return _Endpoint(ready, last, None if since is None else float(since), problem,
                         None if weight is None else int(weight))


class WeightEngine:
    """Thread-safe; ``update`` is the only method that changes weights."""

    def __init__(
        self,
        policy: base.WeightPolicy | str = "slo",
        config: EngineConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = base.create_policy(policy) if isinstance(policy, str) else policy
        self.config = config or EngineConfig()
        self.clock = clock
        self._endpoints: dict[str, _Endpoint] = {}
        self._lock = threading.Lock()

    @property
    def weights(self) -> dict[str, int]:
        """Current weights of all known endpoints (0 for not ready)."""
        with self._lock:
            return {k: (s.weight or 0) for k, s in self._endpoints.items()}

    def forget(self, endpoint_id: str) -> None:
        """Drop an endpoint that left the service (its weight is no longer reported)."""
        with self._lock:
            self._endpoints.pop(endpoint_id, None)
            self.policy.forget(endpoint_id)

    def state(self) -> dict[str, Any]:
        """Everything this engine remembers, as JSON-safe data (see the module docstring):
        ``{"endpoints": {id: {...}}, "policy": name, "policy_state": {...}}``, endpoints in the
        order the engine first saw them (the order it computes in)."""
        with self._lock:
            return {"endpoints": {k: s.state() for k, s in self._endpoints.items()},
                    "policy": self.policy.name, "policy_state": self.policy.state()}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (what :meth:`state` returned). The policy's part is used
        only if it was written by a policy of the same name. A malformed state is a
        :class:`ValueError` and changes nothing."""
        raw = state.get("endpoints", {})
        if not isinstance(raw, Mapping):
            raise ValueError("engine state: endpoints must be a mapping")
        endpoints = {str(k): _Endpoint.from_state(str(k), v) for k, v in raw.items()}
        policy_state = state.get("policy_state", {})
        if not isinstance(policy_state, Mapping):
            raise ValueError("engine state: policy_state must be a mapping")
        with self._lock:
            if state.get("policy") == self.policy.name:
                self.policy.restore(policy_state)
            self._endpoints = endpoints

    def update(
        self, samples: Iterable[metrics.EndpointMetrics] = (), now: float | None = None
    ) -> WeightUpdate:
        """Ingest ``samples`` and recompute every known endpoint's weight at time ``now``."""
        with self._lock:
            now = self.clock() if now is None else now
            for sample in samples:
                self._ingest(sample)
            return self._recompute(now)

    # -- ingestion -------------------------------------------------------------------------

    def _ingest(self, sample: metrics.EndpointMetrics) -> None:
        state = self._endpoints.setdefault(sample.endpoint_id, _Endpoint())
        last = state.last_valid
        if last is not None and _finite(sample.timestamp) and sample.timestamp < last.timestamp:
            return  # out of order: older than what we already trust
        state.ready = bool(sample.ready)
        if not state.ready:
            state.valid_since = None
            return
        found = metrics.problems(sample)
        if not found:
            absent = self.policy.missing(sample)
            if absent:
                found.append(absent)
        if found:
            state.problem = "; ".join(found)
            return
        state.problem = None
        state.last_valid = sample
        if state.valid_since is None:
            state.valid_since = sample.timestamp

    # -- computation -----------------------------------------------------------------------

    def _classify(self, state: _Endpoint, now: float) -> tuple[Status, str]:
        cfg = self.config
        if not state.ready:
            return Status.NOT_READY, "not ready: weight 0"
        if state.last_valid is None:
            detail = f" ({state.problem})" if state.problem else ""
            return Status.NO_DATA, f"no valid sample yet{detail}: mean weight"
        age = now - state.last_valid.timestamp
        if age > cfg.expiry_s:
            state.valid_since = None
            return Status.EXPIRED, (
                f"stale: last valid sample {age:.0f}s old (> {cfg.expiry_s:g}s): mean weight"
            )
        if state.problem is not None and state.weight:
            return Status.HELD, f"malformed sample ({state.problem}): keeping last weight"
        if self.policy.measures and (state.valid_since is None
                                     or now - state.valid_since < cfg.blackout_s):
            since = 0.0 if state.valid_since is None else now - state.valid_since
            return Status.BLACKOUT, (
                f"blackout: {since:.1f}s of data (< {cfg.blackout_s:g}s): mean weight"
            )
        return Status.COMPUTED, ""

    def _recompute(self, now: float) -> WeightUpdate:
        cfg = self.config
        classes = {k: self._classify(s, now) for k, s in self._endpoints.items()}
        candidates = {
            k: s.last_valid
            for k, s in self._endpoints.items()
            if classes[k][0] is Status.COMPUTED and s.last_valid is not None
        }
        failure = None
        try:
            suggestions = self.policy.compute(candidates, now) if candidates else {}
        except Exception as exc:  # a broken policy must not take the data planes down with it
            log.exception("weight policy %s failed", self.policy.name)
            suggestions, failure = {}, f"{type(exc).__name__}: {exc}"
        usable = {
            k: v
            for k, v in suggestions.items()
            if k in candidates and math.isfinite(v.value) and v.value >= 0
        }
        for k in candidates:
            if k in usable:
                continue
            if failure is not None and self._endpoints[k].weight:
                classes[k] = (
                    Status.HELD,
                    f"policy {self.policy.name} failed ({failure}): keeping last weight",
                )
            else:
                classes[k] = (Status.NO_DATA, f"{self.policy.name}: no usable weight: mean weight")
        pinned = {k for k, v in usable.items() if v.pinned_away}
        ignored: set[str] = set()
        if pinned and all(k in pinned for k, (status, _) in classes.items()
                          if status is not Status.NOT_READY):
            ignored, pinned = pinned, set()
        weighed = [v.value for k, v in usable.items() if k not in ignored and k not in pinned]
        mean_value = sum(weighed) / len(weighed) if weighed else 0.0

        targets: dict[str, float] = {}
        reasons: dict[str, str] = {}
        for k, (status, reason) in classes.items():
            state = self._endpoints[k]
            if status is Status.NOT_READY:
                continue
            if k in pinned:
                classes[k] = (Status.PINNED, reason)
                reasons[k] = usable[k].reason
                continue
            if k in ignored:
                targets[k] = float(cfg.reference_weight)
                reason = (f"{usable[k].reason}; but no other ready endpoint would serve: pin "
                          "ignored (pin at most all but one ready endpoint away): mean weight")
            elif status is Status.HELD:
                targets[k] = float(state.weight or cfg.reference_weight)
            elif status is Status.COMPUTED:
                value = usable[k].value
                scaled = cfg.reference_weight * value / mean_value if mean_value > 0 else None
                targets[k] = float(cfg.reference_weight) if scaled is None else scaled
                reason = usable[k].reason
            else:
                targets[k] = float(cfg.reference_weight)
            reasons[k] = reason

        floored = _apply_min_share(
            targets,
            cfg.min_share,
            frozen={k for k, (status, _) in classes.items() if status is Status.HELD},
        )

        decisions: dict[str, Decision] = {}
        for k, state in self._endpoints.items():
            status, reason = classes[k]
            previous = state.weight
            if status is Status.NOT_READY:
                weight, target = 0, 0.0
            elif status is Status.PINNED:
                target, drained = 0.0, list[str]()
                weight = self._limit(previous, target, drained, floor=0)
                reason = "; ".join([reasons[k], *drained])
            elif status is Status.HELD:
                weight, target = previous or cfg.reference_weight, targets[k]
                reason = reasons[k]
            else:
                target = targets[k]
                notes = []
                if k in floored:
                    notes.append(f"raised to min share {cfg.min_share:.0%}")
                weight = self._limit(previous, target, notes)
                reason = "; ".join([reasons[k], *notes])
            state.weight = weight
            decisions[k] = Decision(k, weight, previous, target, status, reason)
        weights = {k: d.weight for k, d in decisions.items()}
        return WeightUpdate(now, weights, decisions)

    def _limit(self, previous: int | None, target: float, notes: list[str],
               floor: int | None = None) -> int:
        """``target`` as a weight within ``[floor, max_weight]`` (``floor``: ``min_weight``
        unless given; 0 only for a pinned endpoint), at most the allowed change away from
        ``previous``, and ``previous`` itself when the change is below the threshold."""
        cfg = self.config
        lo, hi = cfg.min_weight if floor is None else floor, cfg.max_weight
        if target > hi:
            notes.append(f"clipped to {hi}")
        elif target < lo:
            notes.append(f"raised to {lo}")
        wanted = min(float(hi), max(float(lo), target))
        if not previous:
            return round(wanted)
        allowed = max(cfg.max_relative_change * previous, 1.0)
        low = max(lo, math.ceil(previous - allowed))
        high = min(hi, math.floor(previous + allowed))
        weight = min(high, max(low, round(wanted)))
        if weight != round(wanted):
            notes.append(f"limited by max change {cfg.max_relative_change:.0%} per update")
        if weight != previous and abs(weight - previous) < cfg.change_threshold * previous:
            notes.append(f"below change threshold {cfg.change_threshold:.0%}: kept")
            return previous
        return weight


def _apply_min_share(targets: dict[str, float], min_share: float, frozen: set[str]) -> set[str]:
    """Raise targets below ``min_share`` of the total (in place); return the raised ones.

    ``frozen`` endpoints count towards the total but are not changed. With ``n`` endpoints the
    share is capped at ``1 / n``.
    """
    if not targets or min_share <= 0:
        return set()
    share = min(min_share, 1.0 / len(targets))
    raised: set[str] = set()
    while True:  # terminates: ``raised`` grows every round and is bounded by len(targets)
        rest = sum(v for k, v in targets.items() if k not in raised)
        denominator = 1.0 - len(raised) * share
        if denominator <= 1e-12 or rest <= 0:
            level = sum(targets.values()) / len(targets)
            for k in raised:
                targets[k] = level
            return raised
        total = rest / denominator
        low = {
            k
            for k, v in targets.items()
            if k not in raised and k not in frozen and v < share * total * (1 - 1e-9)
        }
        if not low:
            for k in raised:
                targets[k] = share * total
            return raised
        raised |= low


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _number(value: object) -> bool:
    return _finite(value) and not isinstance(value, bool)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
