"""The weight-policy extension point: :class:`WeightPolicy`, its result type and the registry."""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from actuators.dispatch import metrics
from planner.domain.plugins import Registry


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """A policy's relative weight for one endpoint, with the one-line reason behind it."""

    value: float
    reason: str


class WeightPolicy(abc.ABC):
    """Turns per-endpoint metrics into relative dispatch weights.

    Contract:

    * :meth:`compute` receives only endpoints that are ready, past their blackout, and whose
      latest sample is fresh and well-formed (generic checks in :func:`metrics.problems` and this
      policy's :meth:`missing`). The engine owns every guard (blackout, expiry, minimum share,
      change limits, integer range); a policy only ranks.
    * It returns a :class:`Suggestion` with a finite ``value > 0`` for each endpoint it can judge.
      Values are relative: only ratios matter, the engine rescales them. An endpoint left out gets
      the mean weight (e.g. ORCA's "no data yet").
    * ``reason`` is one human line naming the metric that drove the value.
    * A policy may keep per-endpoint state between calls (smoothing, feedback); :meth:`forget`
      drops it when an endpoint disappears, :meth:`state` writes it down as JSON-safe data and
      :meth:`restore` reads it back (the weights actuator builds its engine from the intent's
      memory every cycle: a policy that keeps state but does not write it down starts afresh
      every cycle there). ``compute`` must not raise on odd but well-formed
      input (zero traffic, all idle); it must be cheap enough to run every second.
    """

    name: ClassVar[str] = ""
    #: fields that must be present (not None) for a sample to be usable by this policy
    required_fields: ClassVar[tuple[str, ...]] = ()

    def missing(self, sample: metrics.EndpointMetrics) -> str | None:
        """Why this policy cannot use the sample (a missing field), or None if it can."""
        absent = [name for name in self.required_fields if getattr(sample, name) is None]
        return f"missing {', '.join(absent)}" if absent else None

    @abc.abstractmethod
    def compute(
        self, samples: Mapping[str, metrics.EndpointMetrics], now: float
    ) -> dict[str, Suggestion]:
        """Relative weights for (a subset of) ``samples``, keyed by endpoint id."""

    def forget(self, endpoint_id: str) -> None:  # noqa: B027 - optional hook, no-op by default
        """Drop any state kept for ``endpoint_id``."""

    def state(self) -> dict[str, Any]:
        """What this policy remembers between calls, as JSON-safe data (default: nothing)."""
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:  # noqa: B027 - stateless by default
        """Continue from ``state`` (what :meth:`state` returned); :class:`ValueError` if it is
        malformed."""


def rates_state(values: Mapping[str, float]) -> dict[str, float]:
    """A per-endpoint number map as JSON-safe data (for a policy's :meth:`WeightPolicy.state`)."""
    return dict(values)


def rates_from_state(state: object, what: str) -> dict[str, float]:
    """The per-endpoint number map :func:`rates_state` wrote; :class:`ValueError` if malformed."""
    if state is None:
        return {}
    if not isinstance(state, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(v) for k, v in state.items()):
        raise ValueError(f"{what} must map endpoint ids to finite numbers")
    return {k: float(v) for k, v in state.items()}


POLICY_GROUP = "intent_planner.weight_policies"
REGISTRY: Registry[WeightPolicy] = Registry(POLICY_GROUP, WeightPolicy, "weight policy")
"""Weight policies by name (built-ins ``lvs``, ``orca``, ``slo`` are declared as entry points in
the project's ``pyproject.toml``, like a third party's)."""
register_policy = REGISTRY.register


def create_policy(name: str, **params: Any) -> WeightPolicy:
    """Instantiate the registered policy ``name`` with ``params``."""
    known = REGISTRY.available()
    if name not in known:
        raise KeyError(f"unknown weight policy {name!r}; known: {sorted(known)}")
    return known[name](**params)
