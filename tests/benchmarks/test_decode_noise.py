"""benchmarks/decode_noise.py: its statistics on known inputs (the engine runs are the benchmark's)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("decode_noise", ROOT / "benchmarks" / "decode_noise.py")
dn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dn)


def _run(i, tok_s, clean, flags, held=0):
    return {"run": i, "decode_tok_s": tok_s, "clean_samples": clean, "flags": flags, "held_back": held,
            "repeats_made": len(flags), "within_cv": dn.cv(clean), "server_decode_tok_s": None,
            "server_agreement": None, "startup_s": 30.0, "load_before": 0.5, "load_after": 0.7, "warnings": []}


def test_cv_and_summary_known_answers():
    assert dn.cv([90.0, 100.0, 110.0]) == pytest.approx(0.1)  # stdev 10 / mean 100
    assert dn.cv([5.0]) is None
    runs = [_run(0, 90.0, [89.0, 90.0, 91.0], ["", "burst", "", ""], held=1),
            _run(1, 100.0, [99.0, 100.0, 101.0], ["", "", ""]),
            _run(2, 110.0, [110.0, 110.0, 110.0], ["", "", ""])]
    s = dn.summarize(runs, repeats=3)
    assert s["cv_across_runs"] == pytest.approx(0.1)
    assert s["cv_within_runs_median"] == pytest.approx(0.01)  # 1/90, 1/100, 0 -> median 0.01
    assert (s["repeats_made"], s["repeats_flagged"], s["flags"], s["extra_repeats"]) == (10, 1, {"burst": 1}, 1)
    assert s["repeats_held_back_measured"] == 1
    assert "CV across 3 runs" in dn.format_report(runs, s)
