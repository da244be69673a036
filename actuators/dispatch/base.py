"""The weight-policy extension point: :class:`WeightPolicy`, its result type and the registry."""

from __future__ import annotations

import abc
import dataclasses
import inspect
import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from actuators.dispatch import metrics
from planner.domain.plugins import Registry


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """A policy's relative weight for one endpoint, with the one-line reason behind it.

    ``pinned_away``: the endpoint's owner ruled that it serve nothing (the ``manual`` policy's
    pins): the engine then lets its weight fall to 0 although it is ready (within the change
    limits, and never for every ready endpoint at once). No other policy sets it."""

    value: float
    reason: str
    pinned_away: bool = False


class WeightPolicy(abc.ABC):
    """Turns per-endpoint metrics into relative dispatch weights.

    Contract:

    * :meth:`compute` receives only endpoints that are ready, past their blackout, and whose
      latest sample is fresh and well-formed (generic checks in :func:`metrics.problems` and this
      policy's :meth:`missing`). The engine owns every guard (blackout, expiry, minimum share,
      change limits, integer range); a policy only ranks.
    * It returns a :class:`Suggestion` with a finite ``value >= 0`` for each endpoint it can
      judge. Values are relative: only ratios matter, the engine rescales them; 0 means "as little
      as the guards allow" (the engine's minimum share and weight keep a ready endpoint above 0).
      An endpoint left out gets the mean weight (e.g. ORCA's "no data yet"). Only an owner's rule
      may take a ready endpoint to weight 0: :attr:`Suggestion.pinned_away`.
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
    #: whether the policy judges endpoints by what they measure: the engine then withholds an
    #: endpoint's first ``blackout_s`` of data. False (rules only, e.g. ``manual``): an
    #: endpoint's first valid sample is computed at once (no blackout; expiry still holds).
    measures: ClassVar[bool] = True

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
"""Weight policies by name (built-ins ``lvs``, ``orca``, ``slo``, ``squeeze``, ``manual`` are
declared as entry points in the project's ``pyproject.toml``, like a third party's)."""
register_policy = REGISTRY.register

ALIASES: Mapping[str, str] = {"balance": "slo"}
"""Other names of registered policies, resolved here and nowhere else: ``balance`` is today's
default behaviour, the ``slo`` policy (an alias, not a second entry point: the registry names a
class after its entry point, and the engine's memory records the policy by that name, so
``balance`` and ``slo`` share one memory). An Intent's ``useCase.dispatch: balance`` means the
admin's ``dispatch.policy`` (``slo`` unless the admin changed it; see
:mod:`planner.domain.use_case`): the mapping here is for a caller that names ``balance`` itself
(the admin's ``dispatch.policy``, a benchmark)."""


def resolve_name(name: str) -> str:
    """The registered name ``name`` stands for (itself unless it is an alias)."""
    return ALIASES.get(name, name)


def create_policy(name: str, **params: Any) -> WeightPolicy:
    """Instantiate the registered policy ``name`` (or an alias: :data:`ALIASES`) with
    ``params``.

    Parameters are JSON-friendly keyword arguments; each may also be spelt in camelCase
    (``latencyThresholdMs`` for ``latency_threshold_ms``), as in a Kubernetes resource. A
    parameter the policy does not take is a :class:`ValueError` that lists those it does."""
    known = REGISTRY.available()
    resolved = resolve_name(name)
    if resolved not in known:
        raise KeyError(f"unknown weight policy {name!r}; known: {sorted([*known, *ALIASES])}")
    cls = known[resolved]
    return cls(**policy_params(cls, params))


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(key: str) -> str:
    """``latencyThresholdMs`` -> ``latency_threshold_ms`` (a snake_case key is unchanged)."""
    return _CAMEL.sub("_", key).lower()


def policy_params(cls: type[WeightPolicy], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as keyword arguments of ``cls``: camelCase keys in snake_case, checked against
    its ``__init__`` (:class:`ValueError` for a parameter it does not take or one given twice)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = snake_case(key)
        if name in out:
            raise ValueError(f"{cls.name} policy: parameter {name!r} given twice ({key!r})")
        out[name] = value
    signature = inspect.signature(cls.__init__)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return out
    accepted = [n for n, p in signature.parameters.items() if n != "self" and p.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    unknown = sorted(set(out) - set(accepted))
    if unknown:
        raise ValueError(f"{cls.name} policy: unknown parameter(s) {unknown}; it takes "
                         f"{accepted or 'none'} (camelCase or snake_case)")
    return out
