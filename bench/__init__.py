"""Benchmarks that print their figures (see docs/benchmarks.md)."""
