"""The ``squeeze`` policy: as few pods as possible carry the load, so idle ones can be removed.

Each update:

1. **Capacity.** An endpoint's service rate ``mu`` (requests/s at full utilisation) is
   ``request_rate / utilisation`` (CPU or GPU, the busier), smoothed over updates, a sample
   moving the estimate in proportion to how busy the endpoint was (below ``min_utilisation`` it
   says too little and the previous estimate is kept). Without a measurement: the sample's
   ``capacity_hint``, else the previous estimate, else the median of the other endpoints'
   (pods of one workload are usually alike). With no capacity known anywhere (a cold start with
   no traffic, or endpoints that report no utilisation and no hint) the policy does not guess:
   equal weights, and the reason says so.
2. **Threshold.** An endpoint is full at ``utilisation_threshold x mu``. With
   ``latency_threshold_ms``, an endpoint whose p99 (p95 if no p99) is over it is full at what it
   carries now less ``latency_step``; that cap rises again by ``latency_step`` of its capacity
   per update once its latency is below the threshold by the ``hysteresis`` margin, and is
   dropped when it reaches the utilisation threshold.
3. **Order.** The endpoints in use last time first, in their order (the hot set does not churn),
   then the most capable (capacities within 25 % count as equal), then by id.
4. **How many.** Demand is the sum of the observed request rates. The hot set is the shortest
   prefix of the order whose capacity at the threshold carries it (at least ``min_pods``). It
   grows as soon as demand needs it to, and shrinks only when fewer endpoints would carry the
   demand at ``1 - hysteresis`` of their threshold: demand hovering at a boundary does not make
   an endpoint flap in and out.
5. **Weights.** ``spread: even`` (default): the hot endpoints share the demand in proportion to
   their capacity at the threshold (each at most at the threshold, all equally busy).
   ``spread: spill``: they are filled in order up to their threshold and the last one gets the
   remainder (an endpoint kept by the hysteresis may get nothing). Both use the same number of
   endpoints; measured on a real HAProxy (``bench/squeeze.py``), ``spill`` had the higher p99
   (its full endpoints run at the threshold) and rewrote weights all the time (the remainder
   endpoint's weight takes every fluctuation of the demand), ``even`` kept its weights while
   the hot set held. Every other endpoint gets value 0: the engine's minimum share and weight
   keep it above 0, ready, and able to take load at once. Past every endpoint's threshold
   (overload) the demand is shared in proportion to capacity at the threshold.

The weights are shares: render them where requests are dispatched by weight (HAProxy
``roundrobin``, Envoy's weighted round robin). Under HAProxy ``leastconn`` an idle endpoint
takes a request whenever its few connections, divided by its small weight, compare well with a
busy one's: measured, each idle pod got 8 % of the requests instead of 1 %.

Values are request rates (req/s), which the engine rescales. Each reason names the threshold
and which endpoints are full. The policy's memory (``state()``: the capacity estimates, the hot
set in order, the latency caps) is data; a policy restored from it makes the same next update.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from actuators.dispatch import base, metrics

SPREADS = ("even", "spill")
_SAME_CAPACITY = math.log(1.25)  # capacities within 25 % of each other count as equal
_NAMED = 3  # full endpoints named in a reason


class SqueezePolicy(base.WeightPolicy):
    """Pack load onto as few endpoints as possible, up to a threshold (module docstring).

    Parameters (camelCase accepted): ``utilisation_threshold`` (an endpoint is full at this
    utilisation), ``latency_threshold_ms`` (optional: an endpoint with a p99 over it is full),
    ``hysteresis`` (margin before the hot set shrinks or a latency cap rises), ``spread``
    (``even`` or ``spill``), ``min_pods`` (endpoints kept in use even without load),
    ``smoothing`` (EWMA factor of capacity estimates), ``min_utilisation`` (below it a sample
    says nothing about capacity), ``confident_utilisation`` (a sample this busy moves the
    estimate by the full smoothing factor), ``latency_step`` (fraction shed by an endpoint over
    the latency threshold, per update).
    """

    name = "squeeze"
    required_fields = ("request_rate",)

    def __init__(
        self,
        utilisation_threshold: float = 0.8,
        latency_threshold_ms: float | None = None,
        hysteresis: float = 0.1,
        spread: str = "even",
        min_pods: int = 1,
        smoothing: float = 0.3,
        min_utilisation: float = 0.05,
        confident_utilisation: float = 0.5,
        latency_step: float = 0.1,
    ) -> None:
        _check(_number(utilisation_threshold) and 0 < utilisation_threshold <= 1,
               "utilisationThreshold", utilisation_threshold, "a fraction in (0, 1], e.g. 0.8")
        _check(latency_threshold_ms is None or (_number(latency_threshold_ms)
                                                and latency_threshold_ms > 0),
               "latencyThresholdMs", latency_threshold_ms, "milliseconds > 0, or left out")
        _check(_number(hysteresis) and 0 <= hysteresis < 1, "hysteresis", hysteresis,
               "a fraction in [0, 1), e.g. 0.1")
        _check(spread in SPREADS, "spread", spread, f"one of {list(SPREADS)}")
        _check(isinstance(min_pods, int) and not isinstance(min_pods, bool) and min_pods >= 1,
               "minPods", min_pods, "an integer >= 1")
        _check(_number(smoothing) and 0 < smoothing <= 1, "smoothing", smoothing,
               "a fraction in (0, 1]")
        _check(_number(min_utilisation) and 0 < min_utilisation < 1, "minUtilisation",
               min_utilisation, "a fraction in (0, 1)")
        _check(_number(confident_utilisation) and 0 < confident_utilisation <= 1,
               "confidentUtilisation", confident_utilisation, "a fraction in (0, 1]")
        _check(_number(latency_step) and 0 < latency_step < 1, "latencyStep", latency_step,
               "a fraction in (0, 1), e.g. 0.1")
        self.utilisation_threshold = float(utilisation_threshold)
        self.latency_threshold_s = (None if latency_threshold_ms is None
                                    else float(latency_threshold_ms) / 1000.0)
        self.hysteresis = float(hysteresis)
        self.spread = spread
        self.min_pods = min_pods
        self.smoothing = float(smoothing)
        self.min_utilisation = float(min_utilisation)
        self.confident_utilisation = float(confident_utilisation)
        self.latency_step = float(latency_step)
        self._rates: dict[str, float] = {}
        self._hot: list[str] = []
        self._caps: dict[str, float] = {}

    # -- memory ----------------------------------------------------------------------------

    def forget(self, endpoint_id: str) -> None:
        self._rates.pop(endpoint_id, None)
        self._caps.pop(endpoint_id, None)
        self._hot = [e for e in self._hot if e != endpoint_id]

    def state(self) -> dict[str, Any]:
        """Capacity estimates, the hot set in order, latency caps (req/s)."""
        return {"rates": base.rates_state(self._rates), "hot": list(self._hot),
                "latency_caps": base.rates_state(self._caps)}

    def restore(self, state: Mapping[str, Any]) -> None:
        rates = base.rates_from_state(state.get("rates"), "squeeze rates")
        caps = base.rates_from_state(state.get("latency_caps"), "squeeze latency_caps")
        hot = state.get("hot", [])
        if not isinstance(hot, list) or not all(isinstance(e, str) for e in hot):
            raise ValueError("squeeze hot must be a list of endpoint ids")
        self._rates, self._caps, self._hot = rates, caps, list(hot)

    # -- computation -----------------------------------------------------------------------

    def compute(
        self, samples: Mapping[str, metrics.EndpointMetrics], now: float
    ) -> dict[str, base.Suggestion]:
        measured = {e: self._capacity(e, s) for e, s in samples.items()}
        known = [mu for mu, _ in measured.values() if mu is not None]
        if not known:
            return {e: base.Suggestion(1.0, f"squeeze: no capacity known ({basis}): equal "
                                       "weights until one is measured") for e, (_, basis)
                    in measured.items()}
        assumed = statistics.median(known)
        mu = {e: assumed if m is None else m for e, (m, _) in measured.items()}
        basis = {e: b if m is not None else f"{b}: assumed the others' median"
                 for e, (m, b) in measured.items()}
        caps: dict[str, float] = {}
        notes: dict[str, str] = {}
        for e, sample in samples.items():
            caps[e], notes[e] = self._cap(e, sample, mu[e])
        demand = sum(s.request_rate or 0.0 for s in samples.values())
        order = self._order(samples, mu)
        hot = order[:self._hot_count(order, caps, demand)]
        self._hot = hot + [e for e in self._hot if e not in samples]
        return self._suggest(order, hot, caps, mu, basis, notes, demand)

    def _capacity(self, endpoint_id: str, sample: metrics.EndpointMetrics
                  ) -> tuple[float | None, str]:
        """The smoothed service rate (None: unknown) and what it is based on."""
        lam = sample.request_rate or 0.0
        util = sample.utilisation
        previous = self._rates.get(endpoint_id)
        if util is not None and util >= self.min_utilisation and lam > 0:
            raw, confidence = lam / util, min(1.0, util / self.confident_utilisation)
            basis = f"{lam:.1f} req/s at utilisation {util:.2f}"
        elif previous is None and sample.capacity_hint:
            raw, confidence, basis = sample.capacity_hint, 1.0, "capacity hint"
        elif previous is not None:
            return previous, "previous estimate (too little load to measure)"
        else:
            return None, ("no utilisation reported" if util is None
                          else f"utilisation {util:.2f} too low to measure")
        rate = raw if previous is None else previous + self.smoothing * confidence * (
            raw - previous)
        self._rates[endpoint_id] = rate
        return rate, basis

    def _cap(self, endpoint_id: str, sample: metrics.EndpointMetrics, mu: float
             ) -> tuple[float, str]:
        """What the endpoint carries before it counts as full, and a note when its latency
        set that."""
        at_threshold = self.utilisation_threshold * mu
        limit = self.latency_threshold_s
        if limit is None:
            return at_threshold, ""
        latency = sample.latency_p99 if sample.latency_p99 is not None else sample.latency_p95
        cap = self._caps.get(endpoint_id)
        what = f"p99 {latency * 1000:.0f} ms" if latency is not None else ""
        threshold = f"latency threshold {limit * 1000:g} ms"
        note = ""
        if latency is not None and latency > limit:
            cap = (1.0 - self.latency_step) * (sample.request_rate or 0.0)
            note = f"{what} over {threshold}"
        elif cap is not None and latency is not None and latency <= limit * (1 - self.hysteresis):
            cap += self.latency_step * at_threshold
            note = f"{what} under {threshold}: cap rising"
        elif cap is not None:
            note = f"cap held until p99 is {self.hysteresis:.0%} under {threshold}"
        if cap is None or cap >= at_threshold:
            self._caps.pop(endpoint_id, None)
            return at_threshold, ""
        self._caps[endpoint_id] = cap
        return cap, note

    def _order(self, samples: Mapping[str, metrics.EndpointMetrics],
               mu: Mapping[str, float]) -> list[str]:
        """In use last time (in that order), then the most capable, then by id."""
        previous = [e for e in self._hot if e in samples]
        rest = sorted((e for e in samples if e not in previous),
                      key=lambda e: (-_capacity_class(mu[e]), e))
        return previous + rest

    def _hot_count(self, order: list[str], caps: Mapping[str, float], demand: float) -> int:
        """How many endpoints of ``order`` are in use (see the module docstring, step 4)."""
        previous = sum(1 for e in self._hot if e in caps)

        def needed(scale: float) -> int:
            total = 0.0
            for i, e in enumerate(order):
                if total >= demand:
                    return i
                total += scale * caps[e]
            return len(order)

        grow, shrink = needed(1.0), needed(1.0 - self.hysteresis)
        k = grow if grow >= previous else (shrink if shrink < previous else previous)
        return min(len(order), max(k, self.min_pods))

    def _suggest(self, order: list[str], hot: list[str], caps: Mapping[str, float],
                 mu: Mapping[str, float], basis: Mapping[str, str],
                 notes: Mapping[str, str], demand: float) -> dict[str, base.Suggestion]:
        thr = f"utilisation threshold {self.utilisation_threshold:.2f}"
        total = sum(caps[e] for e in order)
        k = len(hot)
        out: dict[str, base.Suggestion] = {}

        def capacity(e: str) -> str:
            latency = f"; {notes[e]}" if notes[e] else ""
            return f"capacity {mu[e]:.1f} req/s ({basis[e]}){latency}"

        if demand > total:
            for e in order:
                share = demand * caps[e] / total if total > 0 else demand / len(order)
                out[e] = base.Suggestion(share, (
                    f"squeeze: every endpoint full (demand {demand:.1f} req/s > {total:.1f} at "
                    f"the {thr}): {share:.1f} req/s, by capacity; {capacity(e)}"))
            return out
        hot_total = sum(caps[e] for e in hot)
        remaining = demand
        full: list[str] = []
        for i, e in enumerate(hot):
            rank = f"#{i + 1} of {k} in use"
            if demand <= 0:
                value = caps[e]
                why = "no demand: kept in use to take the first requests"
            elif self.spread == "even":
                value = demand * caps[e] / hot_total if hot_total > 0 else 0.0
                why = f"{value:.1f} of {demand:.1f} req/s at utilisation {value / mu[e]:.2f}"
                if k > 1 and (fewer := sum(mu[h] for h in hot[:-1])) > 0:
                    why += (f" (the fewest under the {thr}: {k - 1} would be at "
                            f"{demand / fewer:.2f})")
                else:
                    why += f" (under the {thr})"
            else:
                value = min(remaining, caps[e])
                remaining -= value
                if value >= caps[e] and remaining > 0:
                    why = f"full at {value:.1f} req/s ({thr}): spilling past it"
                elif value > 0:
                    spilled = f" spilled past full {_names(full)}" if full else ""
                    why = f"gets the remainder {value:.1f} req/s{spilled}"
                elif i < self.min_pods:
                    why = f"kept in use (minPods {self.min_pods}): nothing spilled to it now"
                else:
                    why = (f"kept in use by the hysteresis (demand {demand:.1f} req/s is not "
                           f"{self.hysteresis:.0%} under what fewer endpoints carry at the "
                           f"{thr}): nothing spilled to it now")
                if value >= caps[e]:
                    full.append(e)
            out[e] = base.Suggestion(value, f"squeeze: {rank}, {why}; {capacity(e)}")
        for e in order[k:]:
            out[e] = base.Suggestion(0.0, (
                f"squeeze: not needed (demand {demand:.1f} req/s fits the {k} in use at the "
                f"{thr}): smallest weight; {capacity(e)}"))
        return out


def _capacity_class(mu: float) -> int:
    return math.floor(math.log(mu) / _SAME_CAPACITY) if mu > 0 else -(10**9)


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:_NAMED])
    return shown + (f" +{len(ids) - _NAMED} more" if len(ids) > _NAMED else "")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check(ok: bool, field: str, value: object, want: str) -> None:
    if not ok:
        raise ValueError(f"squeeze: {field} must be {want}, not {value!r}")
