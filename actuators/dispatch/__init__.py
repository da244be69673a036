"""Dispatch weights: from live endpoint metrics to integer weights for any data plane.

The policies (built-ins ``lvs``, ``orca``, ``slo``, ``squeeze``, ``manual``, and third
parties') are plugins: see :data:`actuators.dispatch.base.REGISTRY`; ``balance`` is another name
of ``slo`` (:data:`actuators.dispatch.base.ALIASES`).
"""

from actuators.dispatch import manual, policies, slo, squeeze
from actuators.dispatch.base import (
    ALIASES,
    REGISTRY,
    Suggestion,
    WeightPolicy,
    create_policy,
    register_policy,
    resolve_name,
)
from actuators.dispatch.engine import Decision, EngineConfig, Status, WeightEngine, WeightUpdate
from actuators.dispatch.manual import ManualPolicy
from actuators.dispatch.metrics import EndpointMetrics, problems
from actuators.dispatch.policies import LvsPolicy, OrcaPolicy
from actuators.dispatch.slo import LatencyPredictor, SloPolicy
from actuators.dispatch.squeeze import SqueezePolicy

__all__ = [
    "ALIASES",
    "REGISTRY",
    "Decision",
    "EndpointMetrics",
    "EngineConfig",
    "LatencyPredictor",
    "LvsPolicy",
    "ManualPolicy",
    "OrcaPolicy",
    "SloPolicy",
    "SqueezePolicy",
    "Status",
    "Suggestion",
    "WeightEngine",
    "WeightPolicy",
    "WeightUpdate",
    "create_policy",
    "manual",
    "policies",
    "problems",
    "register_policy",
    "resolve_name",
    "slo",
    "squeeze",
]
