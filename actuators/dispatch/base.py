"""The weight-policy extension point: :class:`WeightPolicy`, its result type and the registry."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from actuators.dispatch import metrics


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
      drops it when an endpoint disappears. ``compute`` must not raise on odd but well-formed
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


POLICIES: dict[str, type[WeightPolicy]] = {}

_P = TypeVar("_P", bound=type[WeightPolicy])


def register_policy(name: str) -> Callable[[_P], _P]:
    """Class decorator: register a :class:`WeightPolicy` under ``name``."""

    def decorate(cls: _P) -> _P:
        if name in POLICIES and POLICIES[name] is not cls:
            raise ValueError(f"weight policy {name!r} already registered by {POLICIES[name]!r}")
        cls.name = name
        POLICIES[name] = cls
        return cls

    return decorate


def create_policy(name: str, **params: Any) -> WeightPolicy:
    """Instantiate the registered policy ``name`` with ``params``."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown weight policy {name!r}; known: {sorted(POLICIES)}") from None
    return cls(**params)
