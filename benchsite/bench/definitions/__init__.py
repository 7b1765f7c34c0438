"""Benchmark definitions: benchmarks-as-code (apply.py), the engine option checks and the demo."""
