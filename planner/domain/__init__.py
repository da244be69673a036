"""The domain: intents, cluster state, plans, status, events, errors, admin guardrails and the
ports (cluster backend, KPI source, intent source) every other layer speaks. It imports nothing
else of the project."""
