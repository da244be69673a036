"""The REST API: plan previews, intents with their status and events, effect-model metadata,
health and metrics. :func:`planner.api.app.create_app` builds the FastAPI application."""
