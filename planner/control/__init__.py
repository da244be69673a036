"""Control: the intent controller loop, the training hook and the wiring that assembles a
controller for the simulator, the operator and the REST API."""
