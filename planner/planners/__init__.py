"""Planner plugins (layer: planners): each turns an intent, the observed state and its memory
of the intent into a plan (``grid``, the default; ``queueing``, ``astar``, ``hpa``), plus what
they share: the search space, the predictor choice, the plan's record."""
