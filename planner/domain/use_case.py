"""What an Intent's use case (:class:`planner.domain.intents.UseCase`) means for planning, and
how it shows in the status.

The owner's pins narrow the admin's guardrails for that intent only; they never widen them:

* ``device: cpu|gpu`` leaves the planner that device alone (when the admin allows it; when the
  admin does not, the admin wins and the status says so);
* ``horizontallyScalable: false`` fixes the replica count at what runs now (the planner may
  still change size, device, placement and weights): no actuator of the ``replicas`` knob is
  given to the planner (:func:`fixed_knobs`), and the bounds it reads are the current count
  where that count is within the admin's.

Every planner reads its bounds from :attr:`planner.planners.base.PlanningContext.admin`, so one
narrowed :class:`~planner.domain.admin.AdminConfig` is all it takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.intents import Intent, UseCase
from planner.domain.state import WorkloadConfig

DISPATCH_BALANCE = "balance"
"""``balance``: the admin's dispatch policy (``dispatch.policy``, ``slo`` unless changed)."""


def planning_admin(admin: AdminConfig, intent: Intent, current: WorkloadConfig) -> AdminConfig:
    """``admin`` narrowed by the intent's use case (``admin`` itself when nothing is pinned)."""
    uc = intent.spec.use_case
    if uc is None:
        return admin
    update: dict[str, Any] = {}
    if uc.device != "auto" and uc.device in admin.devices and admin.devices != (uc.device,):
        update["devices"] = (uc.device,)
    bounds = admin.replicas
    if (not uc.horizontally_scalable and bounds.min <= current.replicas <= bounds.max
            and current.replicas >= 1 and (bounds.min, bounds.max) != (current.replicas,) * 2):
        update["replicas"] = ReplicaBounds(min=current.replicas, max=current.replicas,
                                           maxStep=bounds.max_step,
                                           cooldownSeconds=bounds.cooldown_s)
    return admin.model_copy(update=update) if update else admin


def fixed_knobs(intent: Intent) -> frozenset[str]:
    """Knobs no actuator may turn for ``intent``: ``replicas`` when it is not horizontally
    scalable (the planning context leaves the actuators of that knob out, so no planner's plan
    changes the count, whatever bounds it reads)."""
    uc = intent.spec.use_case
    return frozenset({"replicas"}) if uc is not None and not uc.horizontally_scalable \
        else frozenset()


def dispatch_policy(use_case: UseCase | None, admin: AdminConfig) -> tuple[str, dict[str, Any]]:
    """The weight policy (registered name) and its parameters for a workload whose intent has
    ``use_case``: ``balance`` (or no use case) is the admin's policy with its parameters."""
    if use_case is None or use_case.dispatch == DISPATCH_BALANCE:
        return admin.dispatch.policy, dict(admin.dispatch.policy_params)
    return use_case.dispatch, dict(use_case.dispatch_params)


def pin_notes(use_case: UseCase | None, admin: AdminConfig, has_gpu: bool) -> list[str]:
    """Why a pin of the use case cannot hold (empty: every pin holds)."""
    if use_case is None or use_case.device == "auto":
        return []
    if use_case.device not in admin.devices:
        return [f"device {use_case.device} is pinned, but the admin allows only "
                f"{', '.join(admin.devices)}: the admin's guardrail wins"]
    if use_case.device == "gpu" and not has_gpu:
        return ["device gpu is pinned, but the cluster has no GPU node: the pods stay "
                "where they are"]
    return []


def use_case_status(intent: Intent, declared: Iterable[Intent], config: WorkloadConfig | None,
                    notes: Iterable[str] = ()) -> dict[str, Any] | None:
    """The status's ``useCase``: ``current`` (this intent's use case and what runs now: the
    device and replicas), ``all`` (every use case declared for the workload, by intent), and
    ``notes`` (pins that cannot hold). ``None`` when no intent on the workload declares one."""
    uc = intent.spec.use_case
    others = [i for i in declared if i.spec.use_case is not None
              and i.workload_key == intent.workload_key]
    if uc is None and not others:
        return None
    out: dict[str, Any] = {}
    if uc is not None:
        current = uc.as_dict()
        if config is not None:
            current["runningOn"] = config.device
            current["replicas"] = config.replicas
        out["current"] = current
    out["all"] = sorted(({"intent": i.key, "class": i.spec.use_case.workload_class,
                          "name": i.spec.use_case.name, "device": i.spec.use_case.device,
                          "dispatch": i.spec.use_case.dispatch}
                         for i in others if i.spec.use_case is not None),
                        key=lambda d: (d["intent"], d["class"], d["name"]))
    notes = list(notes)
    if notes:
        out["notes"] = notes
    return out
