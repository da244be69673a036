"""Per-endpoint metric samples and their validation.

One :class:`EndpointMetrics` is one observation of one endpoint (a pod, a server). Rates are per
second, utilisations are fractions of the endpoint's allocation (0..1), latencies are seconds,
timestamps are seconds on the same clock the engine is given as ``now`` (monotonic or epoch, the
caller decides). ``None`` means "not measured"; which fields a policy requires is the policy's
business (:meth:`actuators.dispatch.base.WeightPolicy.missing`). ``pool`` is not a measurement
but a label of the endpoint: the node pool its pod runs in (for rules by pool, the ``manual``
policy's).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

# Utilisation may exceed 1 by measurement jitter (rate windows, cgroup accounting); values up to
# this tolerance are accepted as 1.0, beyond it the sample is malformed.
UTILISATION_TOLERANCE = 0.05

_NUMERIC_FIELDS = (
    "cpu_util",
    "gpu_util",
    "in_flight",
    "request_rate",
    "error_rate",
    "latency_p50",
    "latency_p95",
    "latency_p99",
    "capacity_hint",
)


@dataclasses.dataclass(frozen=True)
class EndpointMetrics:
    """One sample of one endpoint.

    ``error_rate`` is in errors per second (same unit as ``request_rate``, as in ORCA's ``eps``);
    ``capacity_hint`` is the service rate (requests per second at full utilisation) the endpoint is
    expected to sustain, e.g. from its device type, used when it cannot be measured; ``pool``
    is the node pool of the endpoint's pod (``PodState.pool``), if known.
    """

    endpoint_id: str
    timestamp: float
    ready: bool = True
    cpu_util: float | None = None
    gpu_util: float | None = None
    in_flight: float | None = None
    request_rate: float | None = None
    error_rate: float | None = None
    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_p99: float | None = None
    capacity_hint: float | None = None
    pool: str | None = None

    @property
    def utilisation(self) -> float | None:
        """The busiest measured resource (max of CPU and GPU utilisation), capped at 1."""
        values = [v for v in (self.cpu_util, self.gpu_util) if v is not None]
        return min(1.0, max(values)) if values else None

    @property
    def error_fraction(self) -> float:
        """Errors per request in 0..1 (0 when there is no traffic or no error data)."""
        if not self.request_rate or self.error_rate is None:
            return 0.0
        return min(1.0, self.error_rate / self.request_rate)


def sample_state(sample: EndpointMetrics) -> dict[str, Any]:
    """``sample`` as JSON-safe data without its endpoint id: the timestamp, ``ready`` when
    false, the pool when known, and the measured fields (an unmeasured one is left out)."""
    out: dict[str, Any] = {"timestamp": float(sample.timestamp)}
    if not sample.ready:
        out["ready"] = False
    if sample.pool is not None:
        out["pool"] = sample.pool
    for name in _NUMERIC_FIELDS:
        value = getattr(sample, name)
        if value is not None:
            out[name] = float(value)
    return out


def sample_from_state(endpoint_id: str, state: Mapping[str, Any]) -> EndpointMetrics:
    """The sample :func:`sample_state` wrote down; :class:`ValueError` if it is malformed."""
    unknown = set(state) - {"timestamp", "ready", "pool", *_NUMERIC_FIELDS}
    if unknown:
        raise ValueError(f"sample of {endpoint_id}: unknown fields {sorted(unknown)}")
    values = {k: v for k, v in state.items() if k not in ("timestamp", "ready", "pool")}
    if not _finite(state.get("timestamp")) or not all(_finite(v) for v in values.values()):
        raise ValueError(f"sample of {endpoint_id}: timestamp and values must be finite numbers")
    ready = state.get("ready", True)
    if not isinstance(ready, bool):
        raise ValueError(f"sample of {endpoint_id}: ready must be a boolean")
    pool = state.get("pool")
    if pool is not None and not isinstance(pool, str):
        raise ValueError(f"sample of {endpoint_id}: pool must be a string")
    return EndpointMetrics(endpoint_id, float(state["timestamp"]), ready, pool=pool, **values)


def problems(sample: EndpointMetrics) -> list[str]:
    """Why a sample is malformed, independent of any policy (empty list: well-formed)."""
    found: list[str] = []
    if not sample.endpoint_id:
        found.append("empty endpoint_id")
    if not _finite(sample.timestamp):
        found.append(f"timestamp={sample.timestamp!r}")
    for name in _NUMERIC_FIELDS:
        value = getattr(sample, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            found.append(f"{name} is not a number ({value!r})")
        elif not math.isfinite(value):
            found.append(f"{name}={value}")
        elif value < 0:
            found.append(f"{name}={value:g} is negative")
    for name in ("cpu_util", "gpu_util"):
        value = getattr(sample, name)
        if _finite(value) and value > 1.0 + UTILISATION_TOLERANCE:
            found.append(f"{name}={value:g} is above 1")
    if sample.pool is not None and not isinstance(sample.pool, str):
        found.append(f"pool is not a string ({sample.pool!r})")
    return found


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
