"""Analysis of probe results: step decomposition, the allreduce share, statistics."""
