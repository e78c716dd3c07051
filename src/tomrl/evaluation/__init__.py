"""Evaluation: benchmarks as data, generation engines, scoring and results with intervals."""
