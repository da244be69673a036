"""The simulated cluster (a front-end of its own: it drives the controller): the embedded
default backend, scenarios, traces and the accounting of SLO minutes and cost; deterministic
for a given seed."""
