"""Builds: the engine a run uses (installed vLLM, an overlay of patches)."""
