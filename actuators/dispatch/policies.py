"""Reference weight policies from existing systems: LVS dynamic feedback and ORCA/gRPC WRR.

Our own policy (SLO-driven) lives in :mod:`actuators.dispatch.slo`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from actuators.dispatch import base, metrics

DEFAULT_LVS_COEFFICIENTS: Mapping[str, float] = {
    "utilisation": 0.5,
    "in_flight": 0.3,
    "latency": 0.2,
}
LVS_METRICS = ("utilisation", "in_flight", "latency", "errors")


class LvsPolicy(base.WeightPolicy):
    """LVS dynamic feedback load balancing.

    Aggregate load ``L_i = sum_k R_k * M_ik`` over normalised metrics ``M_ik`` in 0..1
    (``utilisation``: max of CPU/GPU; ``in_flight``: divided by the largest in-flight count
    among endpoints; ``latency``: p95 divided by ``latency_reference`` or by the largest p95;
    ``errors``: error fraction) with coefficients ``R_k`` renormalised over the metrics an
    endpoint reports. Each endpoint's weight is nudged by ``damping * gain * cbrt(target - L_i)``
    and kept within ``[min_weight, max_weight]`` (relative to an initial weight of 1).
    """

    name = "lvs"

    def __init__(
        self,
        coefficients: Mapping[str, float] | None = None,
        target_load: float = 0.95,
        gain: float = 0.5,
        damping: float = 0.5,
        min_weight: float = 0.05,
        max_weight: float = 4.0,
        latency_reference: float | None = None,
    ) -> None:
        coeffs = dict(DEFAULT_LVS_COEFFICIENTS if coefficients is None else coefficients)
        unknown = set(coeffs) - set(LVS_METRICS)
        if unknown:
            raise ValueError(f"unknown LVS metrics {sorted(unknown)}; known: {LVS_METRICS}")
        if any(not math.isfinite(v) or v < 0 for v in coeffs.values()) or not any(coeffs.values()):
            raise ValueError("LVS coefficients must be finite, >= 0, and not all zero")
        if not 0 < min_weight <= 1 <= max_weight:
            raise ValueError("need 0 < min_weight <= 1 <= max_weight")
        if not 0 < damping <= 1 or gain <= 0:
            raise ValueError("need 0 < damping <= 1 and gain > 0")
        self.coefficients = coeffs
        self.target_load = target_load
        self.gain = gain
        self.damping = damping
        self.min_weight = min_weight
        self.max_weight = max_weight
        self.latency_reference = latency_reference
        self._weights: dict[str, float] = {}

    def missing(self, sample: metrics.EndpointMetrics) -> str | None:
        if not self._raw(sample, 1.0, 1.0):
            return "no load metric (utilisation, in_flight, latency or errors) for lvs"
        return None

    def _raw(
        self, sample: metrics.EndpointMetrics, max_in_flight: float, max_latency: float
    ) -> dict[str, float]:
        values: dict[str, float] = {}
        if self.coefficients.get("utilisation") and sample.utilisation is not None:
            values["utilisation"] = sample.utilisation
        if self.coefficients.get("in_flight") and sample.in_flight is not None:
            values["in_flight"] = sample.in_flight / max_in_flight if max_in_flight > 0 else 0.0
        latency = _tail_latency(sample)
        if self.coefficients.get("latency") and latency is not None:
            reference = self.latency_reference or max_latency
            values["latency"] = min(2.0, latency / reference) if reference > 0 else 0.0
        if self.coefficients.get("errors") and sample.error_rate is not None:
            values["errors"] = sample.error_fraction
        return values

    def compute(
        self, samples: Mapping[str, metrics.EndpointMetrics], now: float
    ) -> dict[str, base.Suggestion]:
        max_in_flight = max((s.in_flight or 0.0 for s in samples.values()), default=0.0)
        max_latency = max((_tail_latency(s) or 0.0 for s in samples.values()), default=0.0)
        out: dict[str, base.Suggestion] = {}
        for endpoint_id, sample in samples.items():
            values = self._raw(sample, max_in_flight, max_latency)
            total_r = sum(self.coefficients[k] for k in values)
            if total_r <= 0:
                continue
            load = sum(self.coefficients[k] * v for k, v in values.items()) / total_r
            old = self._weights.get(endpoint_id, 1.0)
            step = (
                self.damping
                * self.gain
                * math.copysign(abs(self.target_load - load) ** (1 / 3), self.target_load - load)
            )
            new = min(self.max_weight, max(self.min_weight, old + step))
            self._weights[endpoint_id] = new
            detail = ", ".join(f"{k} {v:.2f}" for k, v in sorted(values.items()))
            out[endpoint_id] = base.Suggestion(
                new,
                f"lvs: aggregate load {load:.2f} vs target {self.target_load:.2f} ({detail}); "
                f"weight {old:.2f} -> {new:.2f}",
            )
        return out

    def forget(self, endpoint_id: str) -> None:
        self._weights.pop(endpoint_id, None)

    def state(self) -> dict[str, Any]:
        """Each endpoint's feedback weight."""
        return {"weights": base.rates_state(self._weights)}

    def restore(self, state: Mapping[str, Any]) -> None:
        self._weights = base.rates_from_state(state.get("weights"), "lvs weights")


def _tail_latency(sample: metrics.EndpointMetrics) -> float | None:
    for value in (sample.latency_p95, sample.latency_p99, sample.latency_p50):
        if value is not None:
            return value
    return None


class OrcaPolicy(base.WeightPolicy):
    """gRPC/Envoy client-side weighted round robin fed by ORCA load reports.

    ``weight = qps / (utilisation + eps / qps * error_utilization_penalty)`` where ``eps`` is the
    error rate (errors/s) and utilisation is ``cpu``, ``gpu`` or the ``max`` of both. Endpoints
    with no traffic or zero utilisation have no usable report and are left to the engine's mean
    weight, as in gRPC.
    """

    name = "orca"

    required_fields = ("request_rate",)

    def __init__(self, error_utilization_penalty: float = 1.0, utilisation: str = "max") -> None:
        if utilisation not in {"cpu", "gpu", "max"}:
            raise ValueError("utilisation must be 'cpu', 'gpu' or 'max'")
        if not math.isfinite(error_utilization_penalty) or error_utilization_penalty < 0:
            raise ValueError("error_utilization_penalty must be finite and >= 0")
        self.penalty = error_utilization_penalty
        self.utilisation = utilisation

    def _util(self, sample: metrics.EndpointMetrics) -> float | None:
        if self.utilisation == "cpu":
            return sample.cpu_util
        if self.utilisation == "gpu":
            return sample.gpu_util
        return sample.utilisation

    def missing(self, sample: metrics.EndpointMetrics) -> str | None:
        absent = super().missing(sample)
        if absent is None and self._util(sample) is None:
            return f"missing {self.utilisation} utilisation for orca"
        return absent

    def compute(
        self, samples: Mapping[str, metrics.EndpointMetrics], now: float
    ) -> dict[str, base.Suggestion]:
        out: dict[str, base.Suggestion] = {}
        for endpoint_id, sample in samples.items():
            qps = sample.request_rate or 0.0
            util = self._util(sample) or 0.0
            if qps <= 0 or util <= 0:
                continue
            eps = sample.error_rate or 0.0
            denominator = util + eps / qps * self.penalty
            weight = qps / denominator
            out[endpoint_id] = base.Suggestion(
                weight,
                f"orca: {qps:.1f} qps / (utilisation {util:.2f} + errors {eps / qps:.2f} x "
                f"{self.penalty:g}) = {weight:.1f}",
            )
        return out
