"""Actuators: each proposes, bounds and applies one kind of change to a workload."""
