"""The ``manual`` policy: the owner's rules, under the engine's guards.

Rules (parameters, JSON-friendly; camelCase or snake_case):

* ``weights`` (``{pod: w}``): relative weight of a pod (endpoint id); beats a pool's;
* ``poolWeights`` (``{pool: w}``): relative weight of every pod in a node pool
  (:attr:`~actuators.dispatch.metrics.EndpointMetrics.pool`, from ``PodState.pool``);
* ``defaultWeight`` (default 1): the relative weight of a pod no rule names;
* ``pinnedAway`` / ``pinnedAwayPools`` (lists of pods / pools): these serve nothing;
* ``pinTo`` / ``pinToPools`` (lists of pods / pools): only these serve, every other pod is
  pinned away (``pinnedAway`` still removes pods from that set).

Weights are relative (``{a: 3, b: 1}``: a gets three times b's share) and must be > 0: a pod
stops serving only by a pin, never by a weight of 0. The engine keeps its guards: a pinned-away
pod's weight falls to 0 within the change limits (a new pod starts at 0), every other ready pod
keeps the minimum share, weights move at most the allowed change per update, and pins that would
leave no ready pod serving are ignored, with that reason (a typo in ``pinTo`` does not take the
service down). The policy judges by rules, not measurements (``measures`` false: no blackout,
no metric required). It keeps no memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from actuators.dispatch import base, metrics


class ManualPolicy(base.WeightPolicy):
    """Weights and pins from the owner's rules (see the module docstring)."""

    name = "manual"
    measures = False

    def __init__(
        self,
        weights: Mapping[str, float] | None = None,
        pool_weights: Mapping[str, float] | None = None,
        default_weight: float = 1.0,
        pinned_away: Iterable[str] | None = None,
        pinned_away_pools: Iterable[str] | None = None,
        pin_to: Iterable[str] | None = None,
        pin_to_pools: Iterable[str] | None = None,
    ) -> None:
        self.weights = _weights(weights, "weights", "pod")
        self.pool_weights = _weights(pool_weights, "poolWeights", "pool")
        if not _positive(default_weight):
            raise ValueError(f"manual: defaultWeight must be a number > 0, not {default_weight!r}"
                             " (the relative weight of a pod no rule names)")
        self.default_weight = float(default_weight)
        self.pinned_away = _names(pinned_away, "pinnedAway", "pod")
        self.pinned_away_pools = _names(pinned_away_pools, "pinnedAwayPools", "pool")
        self.pin_to = _names(pin_to, "pinTo", "pod")
        self.pin_to_pools = _names(pin_to_pools, "pinToPools", "pool")
        for field, chosen, removed in (("pinTo", self.pin_to, self.pinned_away),
                                       ("pinToPools", self.pin_to_pools,
                                        self.pinned_away_pools)):
            both = sorted(chosen & removed)
            if both:
                away = "pinnedAway" if field == "pinTo" else "pinnedAwayPools"
                raise ValueError(f"manual: {both} in both {field} and {away}; name each in "
                                 "one of them")

    def _pin(self, endpoint_id: str, pool: str | None) -> str | None:
        """Why the rules pin the endpoint away (None: they do not)."""
        if endpoint_id in self.pinned_away:
            return "pinned away (pinnedAway)"
        if pool is not None and pool in self.pinned_away_pools:
            return f"pool {pool} pinned away (pinnedAwayPools)"
        if self.pin_to or self.pin_to_pools:
            if endpoint_id in self.pin_to or (pool is not None and pool in self.pin_to_pools):
                return None
            where = "pool unknown" if pool is None else f"pool {pool}"
            return f"not in pinTo/pinToPools ({where})"
        return None

    def _value(self, endpoint_id: str, pool: str | None) -> tuple[float, str]:
        if endpoint_id in self.weights:
            return self.weights[endpoint_id], f"pod weight {self.weights[endpoint_id]:g}"
        if pool is not None and pool in self.pool_weights:
            return self.pool_weights[pool], f"pool {pool} weight {self.pool_weights[pool]:g}"
        return self.default_weight, f"default weight {self.default_weight:g}"

    def compute(
        self, samples: Mapping[str, metrics.EndpointMetrics], now: float
    ) -> dict[str, base.Suggestion]:
        out: dict[str, base.Suggestion] = {}
        for endpoint_id, sample in samples.items():
            pin = self._pin(endpoint_id, sample.pool)
            if pin is not None:
                out[endpoint_id] = base.Suggestion(0.0, f"manual: {pin}", pinned_away=True)
                continue
            value, why = self._value(endpoint_id, sample.pool)
            out[endpoint_id] = base.Suggestion(value, f"manual: {why}")
        return out


def _positive(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _weights(value: object, field: str, what: str) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"manual: {field} must map {what} names to relative weights, "
                         f"e.g. {{{what}-a: 2, {what}-b: 1}}")
    out: dict[str, float] = {}
    for key, weight in value.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"manual: {field} has a key {key!r} that is not a {what} name")
        if not _positive(weight):
            fix = ("to stop traffic to it, use pinnedAway" if what == "pod"
                   else "to stop traffic to it, use pinnedAwayPools")
            raise ValueError(f"manual: {field}[{key!r}] must be a number > 0, not {weight!r} "
                             f"(weights are relative; {fix})")
        out[key] = float(weight)
    return out


def _names(value: object, field: str, what: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValueError(f"manual: {field} must be a list of {what} names, not {value!r} "
                         f"(write [{value!r}] for one)")
    names = list(value)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"manual: {field} must list {what} names (non-empty strings); "
                         f"{bad!r} are not")
    return frozenset(names)
