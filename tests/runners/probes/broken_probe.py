"""A probe module that fails while it is imported (tests/runners/probes/test_registry.py): a
process that names it in BENCH_PROBE_MODULES must refuse to start, naming it."""
raise RuntimeError("this probe module is broken on purpose")
