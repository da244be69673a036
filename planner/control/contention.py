"""When intents compete for capacity: plan them together (the controller's side).

The controller plans intents one after another on the room the earlier ones left. When the
safety layer capped one of those plans by capacity (a ``capacity`` part in its reason), this
module asks each active intent's planner for its options on the cluster as observed
(:meth:`planner.planners.base.Planner.shape_options`), lets :func:`planner.planners.joint.assign`
choose one per intent, and, when that serves more priority than planning one after another
did, returns the shape each served intent is to be planned in. Every plan then says so (a
``contention`` part). Nothing here is remembered between cycles: each cycle decides afresh
from what it observes, so a restarted controller decides the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from planner.control.outcome import Staged
from planner.domain.admin import UtilityWeights
from planner.domain.errors import IntentPlannerError
from planner.domain.plan import Plan, ReasonPart
from planner.domain.state import ClusterSnapshot, WorkloadConfig
from planner.planners import joint
from planner.planners.base import PlanningContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """The shapes assigned (intent -> shape) and why, for the plans' reasons."""

    placements: dict[str, WorkloadConfig]
    unserved: tuple[str, ...]
    served: float
    sequential: float
    how: str


def is_capped(plan: Plan | None) -> bool:
    return plan is not None and any(p.kind == "capacity" for p in plan.reason_parts)


def capped(pending: Sequence[Staged]) -> bool:
    """Whether an active plan of this cycle was capped by capacity."""
    return any(s.out.intent.spec.active and is_capped(s.out.plan) for s in pending)


def decide(pending: Sequence[Staged], snapshot: ClusterSnapshot,
           context: Callable[[Staged, ClusterSnapshot], PlanningContext],
           utility: UtilityWeights) -> Decision | None:
    """The joint assignment for this cycle's active intents (``context`` gives an intent's
    planning context on a snapshot), or ``None`` when it serves no more priority than the
    plans made one after another, or a planner cannot offer options."""
    active = [s for s in pending if s.out.intent.spec.active and s.out.plan is not None]
    contenders: list[joint.Contender] = []
    for s in active:
        try:
            options = s.planner.shape_options(context(s, snapshot))
        except (IntentPlannerError, ValueError, ArithmeticError) as exc:
            log.warning("no joint plan: %s could not offer options for %s: %s",
                        s.planner.name, s.out.intent.key, exc)
            return None
        if options is None:
            return None
        contenders.append(joint.Contender(s.out.intent.key, s.workload,
                                          s.out.intent.spec.priority, tuple(options)))
    # What planning one after another served: the intents with options whose plan was not
    # capped (an intent no shape can serve counts on neither side).
    sequential = sum(c.priority for c, s in zip(contenders, active, strict=True)
                     if c.options and not is_capped(s.out.plan))
    found = joint.assign(snapshot, contenders, utility)
    if found is None or found.served <= sequential + 1e-9:
        return None
    placements = {c.key: o.config for c, o in zip(contenders, found.chosen, strict=True)
                  if o is not None}
    unserved = tuple(c.key for c, o in zip(contenders, found.chosen, strict=True)
                     if o is None and c.options)
    return Decision(placements, unserved, found.served, sequential, found.how)


def annotate(pending: Sequence[Staged], decision: Decision) -> None:
    """Add the joint plan's reason to every plan it shaped or left unserved."""
    served = ", ".join(sorted(decision.placements))
    for s in pending:
        key, plan = s.out.intent.key, s.out.plan
        if plan is None:
            continue
        if key in decision.placements:
            p = decision.placements[key]
            text = (f"planned together with the intents competing for capacity: "
                    f"{p.cpu:g} cpu {p.device}" + (f" in {p.pool}" if p.pool else "")
                    + f" assigned so that {served} fit (priority served "
                    f"{decision.served:g}, one after another {decision.sequential:g}; "
                    f"{decision.how})")
        elif key in decision.unserved:
            text = (f"planned together with the intents competing for capacity: not enough "
                    f"room for every intent; {served} served by priority "
                    f"({decision.how}), this one gets what is left")
        else:
            continue
        s.out.plan = replace(plan, reason="", reason_parts=(
            *plan.reason_parts, ReasonPart("contention", text)))
