"""The cluster backend interface: the controller observes and changes a cluster through it.

Two implementations: :mod:`simulator.cluster` (the embedded default) and the Kubernetes
backend. The controller never knows which one it drives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from planner.domain.errors import PermanentError
from planner.domain.intents import Intent, KPIProfile
from planner.domain.state import ClusterSnapshot, WorkloadConfig


class UnsupportedOperation(PermanentError):
    """The backend cannot perform this kind of change."""


class ClusterBackend(ABC):
    """Observe a cluster and apply changes to workloads.

    Contract:

    * :meth:`observe` returns one consistent :class:`ClusterSnapshot`; it raises
      :class:`planner.domain.errors.TemporaryError` when the cluster cannot be read right now.
    * Every mutating method is idempotent (level-based): asking for the value a workload
      already has is a no-op. Workloads are named ``namespace/name``.
    * A mutating method raises :class:`UnsupportedOperation` for changes this backend
      cannot make, :class:`planner.domain.errors.TemporaryError` for changes that may succeed later.
    """

    name: str = "backend"

    @abstractmethod
    def now(self) -> float:
        """Current time in seconds (wall clock, or simulated clock)."""

    @abstractmethod
    def observe(self) -> ClusterSnapshot:
        """Read nodes, workloads and their pods."""

    @abstractmethod
    def scale(self, workload: str, replicas: int) -> None:
        """Set the replica count."""

    def resize(self, workload: str, cpu: float) -> None:
        """Set the CPU request (cores) of every pod, and of the pods to come.

        Where the cluster resizes in place (:attr:`ClusterSnapshot.in_place_resize`) running
        pods keep running at the new size; a pod whose node cannot make room is left to the
        cluster for a while (deferred) and then replaced by a pod of the new size, as is every
        pod where the cluster cannot resize in place (a rollout restarts them)."""
        raise UnsupportedOperation(f"{self.name} backend cannot resize {workload}")

    def set_device(self, workload: str, device: str) -> None:
        """Run the workload on ``cpu`` or ``gpu`` nodes."""
        raise UnsupportedOperation(f"{self.name} backend cannot change the device of {workload}")

    def place(self, workload: str, pool: str | None) -> None:
        """Pin the workload to a node pool (``None``: anywhere)."""
        raise UnsupportedOperation(f"{self.name} backend cannot place {workload}")

    def remove_pod(self, workload: str, pod: str) -> None:
        """Delete one pod and lower the replica count by one."""
        raise UnsupportedOperation(f"{self.name} backend cannot remove pods of {workload}")

    def set_weights(self, workload: str, weights: dict[str, int]) -> None:
        """Set per-pod dispatch weights for the workload's load balancer."""
        raise UnsupportedOperation(f"{self.name} backend has no dispatch weights")

    def expose(self, workload: str, pools: tuple[str, ...]) -> None:
        """Expose the workload's Service through the load balancers of ``pools`` (one
        PoolService per pool; the workload's pods follow the demand each pool is routed,
        :func:`planner.domain.geography.split_replicas`). Observed as
        :attr:`planner.domain.state.WorkloadState.exposure`."""
        raise UnsupportedOperation(f"{self.name} backend cannot expose {workload} per pool")

    def set_canary(self, workload: str, canary: WorkloadConfig | None) -> None:
        """Run ``canary.replicas`` pods of ``canary``'s shape beside the workload, behind the
        same Service (``None``, or 0 replicas: no canary). Observed as
        :attr:`planner.domain.state.WorkloadState.canary`."""
        raise UnsupportedOperation(f"{self.name} backend cannot run a canary of {workload}")


class KPISource(ABC):
    """Measures the current value of a KPI for an intent's workload.

    Contract: :meth:`measure` returns ``None`` when the value is unknown (no data, query
    failed, source down); never a made-up zero. It must not raise for a failing dependency.
    """

    @abstractmethod
    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        """The KPI's current value in the profile's unit (latency in ms)."""

    def measure_all(self, requests: Sequence[tuple[Intent, KPIProfile]]) -> list[float | None]:
        """One cycle's measurements, in the order asked (the controller asks once per cycle).

        The default measures one after another with :meth:`measure`. A source that waits on
        the network runs them concurrently under a deadline, so that one slow server does not
        hold up every intent of the cycle."""
        return [self.measure(intent, profile) for intent, profile in requests]


class IntentSource(ABC):
    """Where intents and KPI profiles come from, and where their status goes."""

    @abstractmethod
    def intents(self) -> list[Intent]:
        """The intents to plan, already validated."""

    @abstractmethod
    def profiles(self) -> dict[str, KPIProfile]:
        """KPI profiles by ``namespace/name``."""

    def report(self, intent: Intent, status: dict[str, object]) -> None:  # noqa: B027
        """Publish an intent's status (a dict shaped like the CRD's ``status``). Optional."""


class StaticIntentSource(IntentSource):
    """Intents and profiles fixed at start-up; statuses kept in memory."""

    def __init__(self, intents: list[Intent], profiles: list[KPIProfile]) -> None:
        self._intents = list(intents)
        self._profiles = {p.key: p for p in profiles}
        self.statuses: dict[str, dict[str, object]] = {}

    def intents(self) -> list[Intent]:
        return list(self._intents)

    def profiles(self) -> dict[str, KPIProfile]:
        return dict(self._profiles)

    def report(self, intent: Intent, status: dict[str, object]) -> None:
        self.statuses[intent.key] = status
