"""benchmarks/pr_checks.py's resampling, on pools of known noise (the service part is the
benchmark's own run: `python benchmarks/pr_checks.py`)."""
import importlib.util
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("pr_checks", ROOT / "benchmarks" / "pr_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pr = _load()


def _pool(cv: float, n: int = 10, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [100 * (1 + rng.gauss(0, cv)) for _ in range(n)]


def test_quiet_engine_starts_are_bounded_by_the_threshold_noisy_ones_by_the_noise():
    quiet = pr.smallest_slowdown(_pool(0.0005), per_side=2, threshold=0.03, trials=200)
    assert quiet["aa_false_alarm_rate"] == 0 and 0.03 <= quiet["smallest_slowdown_95"] <= 0.04
    floor = pr.smallest_slowdown(_pool(0.0005), per_side=2, threshold=0.0, trials=200)
    assert floor["smallest_slowdown_95"] is not None and floor["smallest_slowdown_95"] < 0.03
    noisy = pr.smallest_slowdown(_pool(0.10), per_side=2, threshold=0.03, trials=200)
    assert noisy["smallest_slowdown_95"] is None or noisy["smallest_slowdown_95"] > 0.15
    assert noisy["aa_false_alarm_rate"] <= 0.1


def test_the_report_formats_a_resampling():
    report = pr.resample_report(_pool(0.01), per_side=3, trials=100)
    text = pr.format_report({"resampling": report})
    assert "pool: 10 engine starts" in text and "statistical_floor" in text
