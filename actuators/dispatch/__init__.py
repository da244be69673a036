"""Dispatch weights: from live endpoint metrics to integer weights for any data plane.

The policies (built-ins ``lvs``, ``orca``, ``slo``, and third parties') are plugins: see
:data:`actuators.dispatch.base.REGISTRY`.
"""

from actuators.dispatch import policies, slo
from actuators.dispatch.base import (
    REGISTRY,
    Suggestion,
    WeightPolicy,
    create_policy,
    register_policy,
)
from actuators.dispatch.engine import Decision, EngineConfig, Status, WeightEngine, WeightUpdate
from actuators.dispatch.metrics import EndpointMetrics, problems
from actuators.dispatch.policies import LvsPolicy, OrcaPolicy
from actuators.dispatch.slo import LatencyPredictor, SloPolicy

__all__ = [
    "REGISTRY",
    "Decision",
    "EndpointMetrics",
    "EngineConfig",
    "LatencyPredictor",
    "LvsPolicy",
    "OrcaPolicy",
    "SloPolicy",
    "Status",
    "Suggestion",
    "WeightEngine",
    "WeightPolicy",
    "WeightUpdate",
    "create_policy",
    "policies",
    "problems",
    "register_policy",
    "slo",
]
