"""`manage.py bench_detect FILE.csv --direction higher|lower --json`, as a script would call it."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


def bench_detect(path, *args):
    return subprocess.run([sys.executable, "manage.py", "bench_detect", str(path), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def write_csv(tmp_path, rows, header="series,commit,value"):
    path = tmp_path / "series.csv"
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def test_two_series_judged_alone(tmp_path):
    rows = []
    for i in range(30):
        wobble = 1 + WOBBLE[i % 5] / 100
        rows.append(("decode", f"c{i:02d}", round((100 if i < 20 else 93) * wobble, 3)))  # -7% at c20
        rows.append(("ttft", f"c{i:02d}", round((50 if i < 12 else 55) * wobble, 3)))  # +10% at c12
    proc = bench_detect(write_csv(tmp_path, rows), "--direction", "higher", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["series"]
    (decode,) = out["decode"]["change_points"]
    assert (decode["index"], decode["commit"], decode["previous_commit"]) == (20, "c20", "c19")
    assert abs(decode["change"] - (-0.07)) < 0.005 and decode["kind"] == "regression"
    assert 99 < decode["before"] < 101 and 92 < decode["after"] < 94
    (ttft,) = out["ttft"]["change_points"]
    assert (ttft["index"], ttft["commit"], ttft["kind"]) == (12, "c12", "improvement")
    lower = json.loads(bench_detect(write_csv(tmp_path, rows), "--direction", "lower", "--json").stdout)
    assert lower["series"]["ttft"]["change_points"][0]["kind"] == "regression"


def test_bad_csv_is_refused(tmp_path):
    missing = bench_detect(write_csv(tmp_path, [("a", 1)], header="series,value"), "--direction", "higher", "--json")
    assert missing.returncode != 0 and "missing column(s) commit" in missing.stderr and missing.stdout == ""
    text = bench_detect(write_csv(tmp_path, [("a", "c1", "1.0"), ("a", "c2", "fast")]), "--direction", "higher")
    assert text.returncode != 0 and "line 3: value 'fast' is not a number" in text.stderr
    nan = bench_detect(write_csv(tmp_path, [("a", "c1", "nan")]), "--direction", "higher")
    assert nan.returncode != 0 and "not a finite number" in nan.stderr
    absent = bench_detect(tmp_path / "absent.csv", "--direction", "higher")
    assert absent.returncode != 0 and "cannot read" in absent.stderr
    direction = bench_detect(write_csv(tmp_path, [("a", "c1", "1")]), "--direction", "up")
    assert direction.returncode != 0 and "invalid choice" in direction.stderr
