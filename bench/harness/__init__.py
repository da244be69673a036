"""Real local components the benchmarks and the tests both drive: an HAProxy with its runtime
API, a fleet of heterogeneous HTTP backends, a Kubernetes API server (kmock's emulator). Only
loopback addresses; nothing here is part of the product. (The tests import it; the benchmarks
never import the tests.)"""
