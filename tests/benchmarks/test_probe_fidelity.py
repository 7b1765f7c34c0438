"""Smoke test of benchmarks/probe_fidelity.py: one reduced case through its own functions."""
import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("probe_fidelity", ROOT / "benchmarks" / "probe_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pf = _load()


ATTEMPTS = 3


def _closest(measure, tolerance):
    """The row of up to ATTEMPTS measurements whose probe is closest to the truth, stopping at the
    first within `tolerance`. A bias in the probe shows in every attempt; the CI host's load (four
    engines on 2 cores) only in some: a descheduled first token once read 13% off the truth in
    the held-back case, where a quiet host reads under 1%."""
    rows = []
    for _ in range(ATTEMPTS):
        rows.append(measure())
        if abs(rows[-1]["probe"]["tok_s_err"]) < tolerance:
            break
    return min(rows, key=lambda row: abs(row["probe"]["tok_s_err"]))


def _case(server, **kw):
    """One measurement (5 ms cadence, 1 token per chunk, 48 tokens, 3 repeats). A smoke test of
    the benchmark's functions, tolerance 3 %: the accuracy figure on a quiet host (about 0.1 %)
    is the benchmark's, `make`-free: `python benchmarks/probe_fidelity.py`."""
    return pf.measure_case(server, 5, 1, 48, 3, **kw)


def test_probe_matches_truth_and_table_renders():
    with pf.TokenServer() as server:
        row = _closest(lambda: _case(server, vllm_bench=False), 0.03)
    assert abs(row["probe"]["tok_s_err"]) < 0.03
    assert abs(row["probe"]["itl_p50_err"]) < 0.03
    assert row["truth_probe"]["requests"] == 3
    assert row["probe"]["cpu_us_per_token"] > 0
    table = pf.format_table({"rows": [row], "vllm_startup": None, "wall_s": 1.0, "cpu_count": 2,
                             "loadavg_end": (0.0, 0.0, 0.0)})
    assert "5ms k=1" in table


@pytest.mark.engine
def test_vllm_bench_figures_parse(tiny_model_dir, tmp_path):
    with pf.TokenServer() as server:
        row = _closest(lambda: _case(server, tokenizer=tiny_model_dir, result_dir=tmp_path), 0.03)
    assert abs(row["probe"]["tok_s_err"]) < 0.03
    vb = row["vllm_bench"]
    assert vb["total_output_tokens"] == 3 * 48
    assert row["truth_vllm_bench"]["requests"] == 3
    for key in ("tok_s_1000_over_median_tpot", "output_throughput", "median_tpot_ms", "median_itl_ms",
                "median_ttft_ms", "cpu_s", "cpu_us_per_token_total"):
        assert isinstance(vb[key], float) and math.isfinite(vb[key]) and vb[key] > 0, key
    # loose: vllm bench's TPOT is exact against this server but its client shares 2 busy cores
    assert abs(vb["tok_s_err"]) < 0.05
    # output_throughput includes TTFT (20 ms per 48-token request here): visibly below the decode rate
    assert vb["output_throughput"] < vb["tok_s_1000_over_median_tpot"]


def test_held_back_case_uses_the_generation_times():
    """TCP_NODELAY off, first token after 5 ms, 2 ms per token: truth from the generation times,
    probe within 5% (the quiet-host figure is the benchmark's; before the held-back window the
    probe read +17% in every attempt)."""
    with pf.TokenServer() as server:
        row = _closest(lambda: pf.measure_case(server, 2, 1, 96, 3, ttft_ms=5, nodelay=0, vllm_bench=False), 0.05)
    assert row["truth_probe"]["from"].startswith("generation times")
    # The truth is what the server did: on 2 loaded cores its first token can be late and the
    # exact cadence then catches up (502.6 tok/s seen in CI), or its sleeps overshoot (483 seen),
    # so the nominal 500 is only a sanity bound; the probe is judged against the truth.
    assert 400 < row["truth_probe"]["tok_s"] < 525
    assert abs(row["probe"]["tok_s_err"]) < 0.05
    assert "no-NODELAY ttft=5" in row["case"]
