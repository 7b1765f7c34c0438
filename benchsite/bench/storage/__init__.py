"""Artifact storage: the files of runs (logs, traces, probe output) on the filesystem or S3."""
