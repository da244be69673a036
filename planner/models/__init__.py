"""Effect models: how a workload's KPIs respond to its knobs, learned from events."""
