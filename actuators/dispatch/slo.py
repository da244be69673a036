"""Our policy: shares of load that equalise predicted latency, checked against an SLO target.

Two ways to predict an endpoint's latency at a given share of the total load:

* a caller-supplied predictor ``(endpoint, share) -> seconds`` (e.g. an effect model learned by
  the planner), assumed non-decreasing in ``share``;
* without one, a queueing estimate: each endpoint's service rate ``mu`` (requests/s at full
  utilisation) is estimated from ``request_rate / utilisation``; for endpoints that report no
  utilisation, from latency / in-flight via Little's law (``W = L / lambda``, M/M/1
  ``mu = lambda + 1 / W``) or from ``capacity_hint``. Estimates are smoothed over updates, and a
  sample moves the estimate in proportion to how busy the endpoint was (an idle endpoint tells
  little about its capacity; below ``min_utilisation`` the previous estimate is kept rather than
  guessed from latency, which would feed back: small share -> low utilisation -> biased estimate
  -> smaller share). Predicted sojourn time at arrival rate ``lambda_i`` is
  ``1 / (mu_i - lambda_i)``.

Shares are planned for ``max(observed load * (1 + headroom), planning_floor * total capacity)``.
The headroom covers what the observed rate misses (completions understate arrivals at a saturated
endpoint; bursts) and the tail: equal *mean* delay still leaves the busiest endpoint with the
heaviest tail, and planning for more load spreads it. The floor matters at low load, where water
filling would send everything to the fastest endpoint and a surge would then meet weights that
the engine may only change gradually.

The shares minimise the worst predicted latency, which equalises it across the endpoints that
receive load ("water filling": in the queueing model ``lambda_i = mu_i - c``, i.e. shares follow
spare capacity, and an endpoint with little capacity gets nothing above the engine's minimum
share). Minimising the maximum means: if any split keeps every endpoint under the SLO, this one
does; the reason line says whether the target is met.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from actuators.dispatch import base, metrics

#: ``(endpoint sample, share of total load in 0..1) -> predicted latency in seconds``
LatencyPredictor = Callable[[metrics.EndpointMetrics, float], float]

_LN2 = math.log(2.0)
_OVERLOAD = 0.999  # total load at or above this fraction of total capacity counts as overload


def equal_delay_shares(
    service_rates: Mapping[str, float], total_rate: float
) -> tuple[dict[str, float], float]:
    """M/M/1 shares with equal predicted sojourn time, and that time (inf when overloaded).

    With no load, or load at/above total capacity, shares are proportional to service rate.
    """
    capacity = sum(service_rates.values())
    if capacity <= 0:
        n = max(1, len(service_rates))
        return {k: 1.0 / n for k in service_rates}, math.inf
    if total_rate <= 0 or total_rate >= _OVERLOAD * capacity:
        delay = math.inf if total_rate > 0 else 1.0 / max(service_rates.values())
        return {k: mu / capacity for k, mu in service_rates.items()}, delay
    active = dict(service_rates)
    while True:  # terminates: ``active`` shrinks every round; the fastest endpoint never leaves
        spare = (sum(active.values()) - total_rate) / len(active)
        dropped = {k for k, mu in active.items() if mu < spare}
        if not dropped or len(dropped) == len(active):
            break
        for k in dropped:
            del active[k]
    if spare <= 0:  # only reachable through float rounding
        return {k: mu / capacity for k, mu in service_rates.items()}, math.inf
    shares = {
        k: max(0.0, active[k] - spare) / total_rate if k in active else 0.0 for k in service_rates
    }
    norm = sum(shares.values())
    shares = {k: v / norm for k, v in shares.items()} if norm > 0 else shares
    return shares, 1.0 / spare


def minimax_shares(
    predict: Callable[[str, float], float], endpoint_ids: list[str], iterations: int = 40
) -> tuple[dict[str, float], float]:
    """Shares summing to 1 that equalise ``predict(endpoint, share)`` (non-decreasing in share).

    Returns the shares and the equalised latency level (inf if no finite level carries the load).
    """
    if not endpoint_ids:
        return {}, math.inf

    def share_at(endpoint_id: str, level: float) -> float:
        if not predict(endpoint_id, 0.0) <= level:
            return 0.0
        if predict(endpoint_id, 1.0) <= level:
            return 1.0
        lo, hi = 0.0, 1.0
        for _ in range(iterations):
            mid = (lo + hi) / 2
            if predict(endpoint_id, mid) <= level:
                lo = mid
            else:
                hi = mid
        return lo

    def total(level: float) -> float:
        return sum(share_at(e, level) for e in endpoint_ids)

    finite_idle = [v for v in (predict(e, 0.0) for e in endpoint_ids) if math.isfinite(v)]
    if not finite_idle:
        return {e: 1.0 / len(endpoint_ids) for e in endpoint_ids}, math.inf
    lo = max(min(finite_idle), 1e-9)
    hi = max(lo * 2, max(finite_idle))
    for _ in range(60):  # bounded search for a level that carries the whole load
        if total(hi) >= 1.0:
            break
        lo, hi = hi, hi * 2
    else:
        level = hi
        raw = {e: share_at(e, level) for e in endpoint_ids}
        s = sum(raw.values())
        if s <= 0:
            return {e: 1.0 / len(endpoint_ids) for e in endpoint_ids}, math.inf
        return {e: v / s for e, v in raw.items()}, math.inf
    for _ in range(iterations):  # geometric bisection on the latency level
        mid = math.sqrt(lo * hi)
        if total(mid) >= 1.0:
            hi = mid
        else:
            lo = mid
    raw = {e: share_at(e, hi) for e in endpoint_ids}
    s = sum(raw.values())
    return {e: v / s for e, v in raw.items()}, hi


class SloPolicy(base.WeightPolicy):
    """Weights = shares of load that equalise predicted latency (see module docstring).

    Parameters: ``slo_target`` (seconds, optional, only reported against), ``predictor``
    (optional), ``smoothing`` (EWMA factor for service-rate estimates, 1 = no smoothing),
    ``min_utilisation`` (below it ``request_rate / utilisation`` is too noisy to use),
    ``confident_utilisation`` (a sample from an endpoint this busy gets the full smoothing
    factor, less busy ones proportionally less), ``error_penalty`` (service rate is scaled by
    ``1 - error_penalty * error_fraction``), ``headroom`` (plan for this much more load than
    observed), ``planning_floor`` (plan for at least this fraction of the estimated capacity).
    """

    name = "slo"

    def __init__(
        self,
        slo_target: float | None = None,
        predictor: LatencyPredictor | None = None,
        smoothing: float = 0.3,
        min_utilisation: float = 0.05,
        confident_utilisation: float = 0.5,
        error_penalty: float = 1.0,
        headroom: float = 0.25,
        planning_floor: float = 0.5,
    ) -> None:
        if slo_target is not None and not (math.isfinite(slo_target) and slo_target > 0):
            raise ValueError("slo_target must be a positive number of seconds")
        if not 0 < smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")
        if not 0 <= min_utilisation <= 1 or not 0 < confident_utilisation <= 1:
            raise ValueError("utilisation thresholds must be in [0, 1]")
        if not 0 <= planning_floor < 1 or not 0 <= headroom <= 10:
            raise ValueError("need 0 <= planning_floor < 1 and 0 <= headroom <= 10")
        self.slo_target = slo_target
        self.predictor = predictor
        self.smoothing = smoothing
        self.min_utilisation = min_utilisation
        self.confident_utilisation = confident_utilisation
        self.error_penalty = error_penalty
        self.headroom = headroom
        self.planning_floor = planning_floor
        self._rates: dict[str, float] = {}

    def missing(self, sample: metrics.EndpointMetrics) -> str | None:
        if self.predictor is None and sample.request_rate is None:
            return "missing request_rate for slo (needed without a predictor)"
        return None

    def forget(self, endpoint_id: str) -> None:
        self._rates.pop(endpoint_id, None)

    def state(self) -> dict[str, Any]:
        """Each endpoint's smoothed service-rate estimate (requests/s at full utilisation)."""
        return {"rates": base.rates_state(self._rates)}

    def restore(self, state: Mapping[str, Any]) -> None:
        self._rates = base.rates_from_state(state.get("rates"), "slo rates")

    def estimate_service_rate(
        self, sample: metrics.EndpointMetrics
    ) -> tuple[float, float, str] | None:
        """Unsmoothed service rate (req/s at full utilisation), confidence in 0..1, and what it
        is based on; None when the sample says nothing reliable about capacity."""
        lam = sample.request_rate or 0.0
        util = sample.utilisation
        if util is not None:
            if util < self.min_utilisation or lam <= 0:
                return None
            confidence = min(1.0, util / self.confident_utilisation)
            return lam / util, confidence, f"{lam:.1f} req/s at utilisation {util:.2f}"
        if lam > 0 and sample.latency_p50:
            mean_sojourn = sample.latency_p50 / _LN2  # M/M/1 sojourn is exponential
            basis = f"{lam:.1f} req/s at p50 {sample.latency_p50:.3f}s"
            return lam + 1.0 / mean_sojourn, 1.0, basis
        if lam > 0 and sample.in_flight:
            mean_sojourn = sample.in_flight / lam  # Little's law
            basis = f"{lam:.1f} req/s with {sample.in_flight:g} in flight"
            return lam + 1.0 / mean_sojourn, 1.0, basis
        if sample.capacity_hint:
            return sample.capacity_hint, 1.0, "capacity hint"
        return None

    def _service_rates(
        self, samples: Mapping[str, metrics.EndpointMetrics]
    ) -> dict[str, tuple[float, str]]:
        rates: dict[str, tuple[float, str]] = {}
        for endpoint_id, sample in samples.items():
            estimate = self.estimate_service_rate(sample)
            previous = self._rates.get(endpoint_id)
            if estimate is None and sample.capacity_hint and previous is None:
                estimate = (sample.capacity_hint, 1.0, "capacity hint")
            if estimate is None:
                if previous is None:
                    continue
                rate, basis = previous, "previous estimate (too little traffic to measure)"
            else:
                raw, confidence, basis = estimate
                penalty = max(0.01, 1.0 - self.error_penalty * sample.error_fraction)
                raw *= penalty
                if penalty < 1.0:
                    basis += f", errors x{penalty:.2f}"
                if previous is None:
                    rate = raw
                else:
                    rate = previous + self.smoothing * confidence * (raw - previous)
            self._rates[endpoint_id] = rate
            rates[endpoint_id] = (rate, basis)
        return rates

    def _verdict(self, level: float) -> str:
        if self.slo_target is None:
            return "no SLO target"
        if level <= self.slo_target:
            return f"SLO {self.slo_target * 1000:.0f} ms met"
        return f"SLO {self.slo_target * 1000:.0f} ms at risk"

    def compute(
        self, samples: Mapping[str, metrics.EndpointMetrics], now: float
    ) -> dict[str, base.Suggestion]:
        if self.predictor is not None:
            return self._with_predictor(samples, self.predictor)
        rates = self._service_rates(samples)
        observed = sum(samples[e].request_rate or 0.0 for e in rates)
        capacity = sum(rate for rate, _ in rates.values())
        planned = max(observed * (1 + self.headroom), self.planning_floor * capacity)
        shares, delay = equal_delay_shares({e: r for e, (r, _) in rates.items()}, planned)
        verdict = self._verdict(delay)
        level = "overloaded" if math.isinf(delay) else f"{delay * 1000:.0f} ms"
        load = f"{observed:.1f} req/s"
        if planned > observed:
            load += f" (planned for {planned:.1f})"
        return {
            e: base.Suggestion(
                shares[e],
                f"slo: capacity {rate:.1f} req/s ({basis}); share {shares[e]:.0%} of {load}, "
                f"predicted queueing delay {level} everywhere; {verdict}",
            )
            for e, (rate, basis) in rates.items()
        }

    def _with_predictor(
        self, samples: Mapping[str, metrics.EndpointMetrics], predictor: LatencyPredictor
    ) -> dict[str, base.Suggestion]:
        def predict(endpoint_id: str, share: float) -> float:
            value = float(predictor(samples[endpoint_id], share))
            return value if value >= 0 and not math.isnan(value) else math.inf

        shares, level = minimax_shares(predict, sorted(samples))
        verdict = self._verdict(level)
        return {
            e: base.Suggestion(
                share,
                f"slo: predictor gives {predict(e, share) * 1000:.0f} ms at share {share:.0%} "
                f"(equalised level {level * 1000:.0f} ms); {verdict}",
            )
            for e, share in shares.items()
        }
