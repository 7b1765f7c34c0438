"""Probes that run against a live inference server. Plain Python + httpx (no Django)."""
from runners.probes.decode import ProbeError, measure_decode, scrape_server_metrics
from runners.probes.streams import measure_point

__all__ = ["ProbeError", "measure_decode", "measure_point", "scrape_server_metrics"]
