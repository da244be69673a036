"""Data-plane writers: render one set of dispatch weights to a concrete data plane.

Implementations: :mod:`actuators.dataplanes.haproxy` (runtime API),
:mod:`actuators.dataplanes.envoy` (EDS file), :mod:`actuators.dataplanes.configmap` (Kubernetes
ConfigMap through a caller-supplied apply function).
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from collections.abc import Iterable, Mapping

log = logging.getLogger(__name__)


def render_template(template: str, namespace: str, name: str, pod: str = "") -> str:
    """A data-plane name template of ``admin.dispatch`` with ``{namespace}``, ``{name}`` and
    ``{pod}`` filled in (the fields :data:`planner.domain.admin.TEMPLATE_FIELDS` allows)."""
    return template.format(namespace=namespace, name=name, pod=pod)


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """Outcome of one write: ``ok`` only if every weight reached the data plane."""

    target: str
    ok: bool
    written: tuple[str, ...] = ()
    failed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    attempts: int = 1
    message: str = ""


class DataPlaneWriter(abc.ABC):
    """Writes endpoint weights (endpoint id -> integer weight, 0 = no new traffic) to one data
    plane.

    Contract: :meth:`write` is idempotent (writing the same weights twice is harmless), never
    raises for data-plane trouble (unreachable, rejected) but reports it in the
    :class:`WriteResult` and the log, retries temporary errors with bounded backoff, and returns
    within a bounded time. It raises ``ValueError`` only for caller mistakes (a weight outside
    the data plane's range). Endpoints absent from ``weights`` are left as they are.
    """

    #: short name of the data plane, used in results and logs
    target: str = ""

    @abc.abstractmethod
    def write(self, weights: Mapping[str, int]) -> WriteResult:
        """Apply ``weights`` to the data plane."""


def check_weights(weights: Mapping[str, int], low: int = 0, high: int = 256) -> None:
    """Raise ``ValueError`` if a weight is not an integer in ``[low, high]``."""
    for endpoint_id, weight in weights.items():
        if isinstance(weight, bool) or not isinstance(weight, int) or not low <= weight <= high:
            raise ValueError(f"weight of {endpoint_id!r} must be an int in [{low}, {high}]")


def backoff_delays(attempts: int, base_s: float, max_s: float) -> list[float]:
    """Sleeps between ``attempts`` tries: ``base_s * 2**i`` capped at ``max_s``."""
    return [min(max_s, base_s * 2**i) for i in range(max(0, attempts - 1))]


def write_all(writers: Iterable[DataPlaneWriter], weights: Mapping[str, int]) -> list[WriteResult]:
    """Render one weight set (the engine's global view) to every data plane."""
    results = []
    for writer in writers:
        result = writer.write(weights)
        if not result.ok:
            log.warning("data plane %s: %s", result.target, result.message)
        results.append(result)
    return results
