"""runners.probes.comm.latency: the one allreduce figure a job needs, and the fallbacks it names."""
from .test_interleaved import TINY


def test_analytic_estimate_falls_back_to_the_sweep_without_gpus(monkeypatch):
    """runners.probes.comm.latency.comm_latency: interleaved on GPUs, else the plain sweep, saying why.
    The host is made GPU-less for the backend check, so the test means the same everywhere."""
    import torch

    from runners.probes.comm.latency import comm_latency

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    point = comm_latency(tensor_parallel_size=2, hidden_size=64, dtype="fp32", env={}, graph=True, config=TINY)
    assert point["mode"] == "eager" and point["backend"] == "gloo"
    assert point["bytes"] == 64 * 4 and point["us_per_call"] > 0
    assert any(n.startswith("interleaved mode (default) unavailable: CommError") for n in point["notes"])
    assert "plain sweep used" in point["notes"]


def test_custom_allreduce_estimate_says_why_it_fell_back(monkeypatch):
    """A custom-allreduce step tries vLLM's kernel first, then NCCL's protocol, then the sweep,
    and every fallback is named in the notes (here: no GPUs, so each interleaved try fails)."""
    import torch

    from runners.probes.comm.latency import comm_latency

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    point = comm_latency(tensor_parallel_size=2, hidden_size=64, dtype="fp32", env={}, graph=True, config=TINY,
                         custom_allreduce=True)
    tried = [n.split(")")[0] for n in point["notes"] if n.startswith("interleaved mode (")]
    assert tried == ["interleaved mode (custom", "interleaved mode (default"]
    assert point["notes"][0].startswith("interleaved mode (custom) unavailable: CommError")
    assert point["mode"] == "eager" and point["us_per_call"] > 0
