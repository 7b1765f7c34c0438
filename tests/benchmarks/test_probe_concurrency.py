"""Smoke test of benchmarks/probe_concurrency.py: one reduced row through its own functions."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("probe_concurrency", ROOT / "benchmarks" / "probe_concurrency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pc = _load()


def test_a_row_matches_the_truth_and_renders():
    """4 streams, tokens every 10, 13 and 17 ms, 32 tokens, 2 repeats. Loose bounds (3%) for the
    loaded CI host; the quiet-host figures are the benchmark's own."""
    with pc.TokenServer() as server:
        row = pc.measure_row(server, 4, 10.0, max_tokens=32, repeats=2)
    assert row["streams"] == 8 and row["flagged"] <= 1
    assert row["stream_err_median"] < 0.03 and row["aggregate_err_max"] < 0.03
    assert 0.5 * row["nominal_events_s"] < row["events_s"] < 1.5 * row["nominal_events_s"]
    assert "C=4" in pc.format_row(row) and "events/s" in pc.format_row(row)
    assert pc.passes({"flagged": 0, "stream_err_p90": 0.001}) and not pc.passes({"flagged": 1, "stream_err_p90": 0.0})
