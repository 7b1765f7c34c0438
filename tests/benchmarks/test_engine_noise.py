"""benchmarks/engine_noise.py through its own functions, against the fake token server (its real
probe, plain client and /metrics reading; the engine starts are the GPU host's)."""
import importlib.util
from pathlib import Path

import pytest

from runners.probes.client import CompletionClient
from tests.runners.probes.conftest import token_server  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("engine_noise", ROOT / "benchmarks" / "engine_noise.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


en = _load()


def test_a_phase_reads_probe_whole_stream_engine_and_plain_client(token_server):  # noqa: F811
    """8 ms a token, 40 tokens, probe and plain client alternating: each request's engine rate is
    the one the server generated at (its recorded generation times, read from its histograms over
    that request alone); the clients' whole-stream rates are within 10% of it (a client
    descheduled at an edge of a 0.3 s stream on the loaded host moves them by a few %)."""
    sc = dict(cadence_ms=8, metrics=1, tag="engine-noise")
    url = token_server.url(**sc)
    with CompletionClient(url, timeout_s=30) as api:
        p = en.phase(api, url, "fake-model", repeats=2, max_tokens=40)
    assert len(p["probe"]) == len(p["plain"]) == 2
    gen = [r["gen"] for r in token_server.log(**sc)]  # probe, plain, probe, plain
    truth = [(len(g) - 1) / (g[-1] - g[0]) for g in gen]
    for x, t in zip(p["probe"] + p["plain"], truth[0::2] + truth[1::2]):
        assert x["engine_tok_s"] == pytest.approx(t, rel=1e-6)
        assert x["whole_tok_s"] == pytest.approx(t, rel=0.1)
    assert all(x["host_loop_ms"] > 0 for x in p["probe"] + p["plain"])
    assert p["host_loop_ms"][0] <= p["host_loop_ms"][1]


def test_summary_across_and_within_starts():
    def phase(rates, probe_median):
        return {"probe_median": probe_median, "plain_median": probe_median, "engine_median": probe_median,
                "plain": [{"whole_tok_s": r} for r in rates], "trimmed": 0, "flagged": 0}

    s = en.summarize([{"free": phase([50, 60], 55.0)}, {"free": phase([40, 40], 45.0)}])["free"]
    assert s["starts"] == 2 and s["probe_medians"] == [55.0, 45.0]
    assert s["cv_probe_across_starts"] == pytest.approx(0.1414, abs=1e-4)  # stdev 7.07 / mean 50
    assert s["probe_vs_plain"] == [0.0, 0.0]


def test_distinct_core_cpus_are_allowed_cpus():
    import os

    cpus = en.distinct_core_cpus(2)
    assert len(cpus) == 2 and set(cpus) <= os.sched_getaffinity(0)
