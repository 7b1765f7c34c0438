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


def test_the_service_rule_at_0_08_percent_noise_finds_1_percent_in_two_starts_without_false_alarms():
    rule = pr.service_rule(_pool(0.0008, n=24), first=2, cap=6, trials=300)
    assert rule["noise_from_other_starts"] and rule["max_starts_per_side"] == 6
    assert rule["aa_false_alarm_rate"] <= 0.01 and rule["smallest_slowdown_95"] <= 0.01
    # the slowdowns near the 0.5% floor straddle it and run to the cap: they set the mean
    assert rule["mean_starts_per_side"] <= 3.5


def test_a_pool_too_small_for_the_cap_and_the_noise_shrinks_the_cap_or_leaves_the_noise_unknown():
    assert pr.service_rule(_pool(0.01, n=12), first=2, cap=6, trials=50)["max_starts_per_side"] == 3
    small = pr.service_rule(_pool(0.01, n=8), first=2, cap=6, trials=50)
    assert (small["max_starts_per_side"], small["noise_from_other_starts"]) == (4, False)


def _refused(tmp_path, capsys, content: str, *flags) -> str:
    path = tmp_path / "starts.json"
    path.write_text(content)
    try:
        pr.main(["--resample", str(path), *flags])
    except SystemExit as exc:
        assert exc.code == 2
        return capsys.readouterr().err
    raise AssertionError("not refused")


def test_bad_input_is_refused_with_the_reason(tmp_path, capsys):
    assert "3 engine starts; resampling needs at least 4" in _refused(tmp_path, capsys, '{"starts": [1, 2, 3]}')
    assert "not a JSON file" in _refused(tmp_path, capsys, "[1, 2")
    assert "list of positive figures" in _refused(tmp_path, capsys, '{"starts": [1, -2, 3, 4]}')
    starts = '{"starts": [1, 2, 3, 4, 5]}'
    assert "--max-starts-per-side must be from --starts-per-side (3) to 20" in _refused(
        tmp_path, capsys, starts, "--starts-per-side", "3", "--max-starts-per-side", "2")
    assert "to 20" in _refused(tmp_path, capsys, starts, "--max-starts-per-side", "21")
