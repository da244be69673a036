"""Dispatch weights: from live endpoint metrics to integer weights for any data plane.

Importing this package registers the built-in policies ``lvs``, ``orca`` and ``slo``.
"""

from actuators.dispatch import policies, slo
from actuators.dispatch.base import (
    POLICIES,
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
    "POLICIES",
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
