"""intent-planner: declare what a workload needs; the planner decides how much."""

__version__ = "0.1.0"
