"""Effect models (layer: models): how a workload's KPIs respond to its knobs - scikit-learn
estimators learned from events, the explicit queueing estimate, the load forecast - and their
serialisation as documents. Pure: no knowledge base, no planner, no controller."""
