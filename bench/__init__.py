"""Benchmarks: each bench_*.py prints figures next to a baseline measured in the same run."""
