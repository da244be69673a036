"""Actuators (layer: actuators): each proposes, bounds and applies one kind of change to a
workload (replicas, CPU size, device, placement, dispatch weights), remembering only what its
memory of the intent holds; the dispatch-weight engine and the data-plane writers live here."""
