"""`manage.py bench_detect FILE.csv --direction higher|lower [--metric M] [--min-change X] --json`, as
a script would call it."""
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

from django.core.management import execute_from_command_line

ROOT = Path(__file__).resolve().parents[3]
WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


def bench_detect(path, *args):
    """The command as `manage.py` runs it (its exit code, stdout and stderr), in this process: a
    Python start with Django's set-up costs 1-3 s a call under the suite's load."""
    argv = ["manage.py", "bench_detect", str(path), *args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            execute_from_command_line(argv)
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_the_script_calls_it_as_a_command_line(tmp_path):
    """One real process: `manage.py bench_detect` from the shell, its exit code and its JSON."""
    path = write_csv(tmp_path, [("a", f"c{i}", 100.0) for i in range(5)])
    proc = subprocess.run([sys.executable, "manage.py", "bench_detect", str(path), "--direction", "higher", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["series"]["a"]["change_points"] == []


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


def _quiet_steps(tmp_path):
    """Three series of 60 commits at 0.08% noise: a 1% step, a 0.2% step (below the floor), none."""
    import random

    rng, rows = random.Random(11), []
    for name, step in (("one", -0.01), ("fifth", -0.002), ("flat", 0.0)):
        for i in range(60):
            rows.append((name, f"c{i:02d}", round(100 * (1 + (step if i >= 30 else 0)) * (1 + 0.0008 * rng.gauss(0, 1)), 4)))
    return write_csv(tmp_path, rows)


def test_metric_applies_the_service_rule_and_min_change_overrides_it(tmp_path):
    path = _quiet_steps(tmp_path)
    found = {}
    for args in ([], ["--metric", "decode_tok_s"], ["--min-change", "0.03"], ["--metric", "decode_tok_s", "--min-change", "0.001"]):
        proc = bench_detect(path, "--direction", "higher", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        found[" ".join(args)] = {n: [cp["index"] for cp in s["change_points"]] for n, s in json.loads(proc.stdout)["series"].items()}
    # no floor: both steps; the rule's floor of 0.5% (the noise is 0.08%): the 1% step only; 3%: none
    assert found[""] == {"one": [30], "fifth": [30], "flat": []}
    assert found["--metric decode_tok_s"] == {"one": [30], "fifth": [], "flat": []}
    assert found["--min-change 0.03"] == {"one": [], "fifth": [], "flat": []}
    assert found["--metric decode_tok_s --min-change 0.001"] == found[""]


def test_metric_and_min_change_are_checked(tmp_path):
    path = _quiet_steps(tmp_path)
    unknown = bench_detect(path, "--direction", "higher", "--metric", "tok_s")
    assert unknown.returncode != 0 and "--metric 'tok_s' names no judged metric" in unknown.stderr
    undirected = bench_detect(path, "--direction", "higher", "--metric", "mem_bandwidth_gb_s")
    assert undirected.returncode != 0 and "names no judged metric" in undirected.stderr
    negative = bench_detect(path, "--direction", "higher", "--min-change", "-0.1")
    assert negative.returncode != 0 and "--min-change must be a relative change from 0 to below 1" in negative.stderr
