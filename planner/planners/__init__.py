"""Planner plugins: each turns an intent and the observed state into a plan."""
