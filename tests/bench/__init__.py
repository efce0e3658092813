"""Benchmarks that print figures against their targets (run as modules; never collected by pytest)."""
