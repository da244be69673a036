"""Dispatch weights: from live endpoint metrics to integer weights for any data plane.

Importing this package registers the built-in policies ``lvs``, ``orca`` and ``slo``.
"""

from planner.weights import policies, slo
from planner.weights.base import (
    POLICIES,
    Suggestion,
    WeightPolicy,
    create_policy,
    register_policy,
)
from planner.weights.engine import Decision, EngineConfig, Status, WeightEngine, WeightUpdate
from planner.weights.metrics import EndpointMetrics, problems
from planner.weights.policies import LvsPolicy, OrcaPolicy
from planner.weights.slo import LatencyPredictor, SloPolicy

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
