"""A simulated cluster: the embedded default backend, deterministic for a given seed."""
