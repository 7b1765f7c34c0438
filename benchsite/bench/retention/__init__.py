"""Retention: which artifact files the policy frees and which runs keep theirs (`manage.py bench_gc`)."""
