"""Probes that run against a live inference server. Plain Python + httpx (no Django)."""
from runners.probes.decode import ProbeError, measure_decode, scrape_server_metrics

__all__ = ["ProbeError", "measure_decode", "scrape_server_metrics"]
