"""The ``exposure`` actuator: which node pools' load balancers expose a workload's Service.

It writes the selection through :meth:`planner.domain.ports.ClusterBackend.expose` (on
Kubernetes the Service's ``service.openyurt.io/nodepool-labelselector`` annotation; OpenYurt's
fan-out, or ours, makes one PoolService per selected pool). The decision which pools to want is
the planner's (:mod:`planner.planners.exposure`); this actuator turns it into one change at a
time within the guardrails, each with its reason:

* only pools the intent's data residency allows (``spec.regions``) and the cluster has;
* at most ``admin.exposure.maxPools`` pools; never none;
* one pool added or removed per change (a new pool's load balancer and pods come up before the
  next is touched), and after a change none for ``admin.exposure.cooldownSeconds``.

**Memory** (JSON-safe, :mod:`planner.domain.memory`): ``{"last_change": time}``.
It owns no :class:`~planner.domain.state.WorkloadConfig` knob (``knobs`` is empty): search
planners do not explore exposure; the exposure decision does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from actuators.base import Actuator
from actuators.cooldown import Cooldown
from planner.domain.admin import AdminConfig
from planner.domain.errors import PermanentError
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import WorkloadConfig, WorkloadState


def allowed_pools(pool_region: Mapping[str, str], regions: Sequence[str] | None) -> list[str]:
    """The pools of ``pool_region`` (pool -> region) whose region ``regions`` allows (``None``:
    every pool), sorted."""
    return sorted(p for p, r in pool_region.items() if regions is None or r in regions)


class ExposureActuator(Actuator):
    """Adds or removes one exposing pool per change (see the module docstring)."""

    name = "exposure"
    knobs = ()

    def __init__(self, admin: AdminConfig) -> None:
        super().__init__(admin)
        self.cooldown = Cooldown(admin.exposure.cooldown_s)

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        return []

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        return []

    def clip_pools(self, wanted: Sequence[str], allowed: Sequence[str],
                   keep: Sequence[str] = ()) -> tuple[str, ...]:
        """``wanted`` within ``allowed`` and the admin's cap (the first ``maxPools`` in the
        order given: the planner lists them by preference), never empty: ``keep`` (the
        current exposure within ``allowed``) or the first allowed pool stands in."""
        out = [p for p in dict.fromkeys(wanted) if p in allowed]
        cap = self.admin.exposure.max_pools
        if cap is not None:
            out = out[:cap]
        if not out:
            out = [p for p in keep if p in allowed][:cap or None] or list(allowed)[:1]
        return tuple(sorted(out))

    def propose(self, workload: str, current: Sequence[str], wanted: Sequence[str],
                allowed: Sequence[str], why: str, now: float, memory: Memory) -> list[Action]:
        """The change that moves ``current`` one pool towards ``wanted`` (clipped, see
        :meth:`clip_pools`), or none (reached, or held: the reason is in ``held``). ``why``
        is the planner's reason, carried into the action's."""
        self.held.pop(workload, None)
        if not allowed:
            self.held[workload] = "exposure held: no pool in the intent's regions"
            return []
        goal = self.clip_pools(wanted, allowed, current)
        now_set = tuple(sorted(current))
        if goal == now_set:
            return []
        add = [p for p in goal if p not in now_set]
        drop = [p for p in now_set if p not in goal]
        cap = self.admin.exposure.max_pools
        if add and drop and cap is not None and len(now_set) >= cap:
            # at the cap: one pool for another in one change (never fewer than one exposed)
            nxt = tuple(sorted((*(p for p in now_set if p != drop[0]), add[0])))
            what = (f"move {workload}'s exposure from pool {drop[0]} to pool {add[0]} "
                    f"(maxPools {cap})")
        elif add:
            nxt = tuple(sorted((*now_set, add[0])))
            what = f"expose {workload} in pool {add[0]}{' too' if now_set else ''}"
        else:
            nxt = tuple(p for p in now_set if p != drop[0])
            what = f"stop exposing {workload} in pool {drop[0]}"
        held = self.cooldown.why_held(memory, now, what)
        if held is not None:
            self.held[workload] = held.replace("(it restarts pods)",
                                               "(exposure.cooldownSeconds)")
            return []
        return [Action(self.name, workload, {"pools": list(nxt), "from": list(now_set)},
                       f"{what}: {why}" if why else what)]

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        pools = action.params.get("pools")
        if not isinstance(pools, list) or not pools or not all(isinstance(p, str)
                                                               for p in pools):
            raise PermanentError(f"exposure action for {action.workload}: params.pools must "
                                 "be a non-empty list of pool names")
        backend.expose(action.workload, tuple(pools))

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        return self.cooldown.record(memory, now)
