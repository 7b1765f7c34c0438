"""runners.analysis.analyze: the seed's allreduce arithmetic as a command and a function."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.analysis.analyze import Range, decompose, parse_value

ROOT = Path(__file__).resolve().parents[3]


def run_cli(*argv):
    return subprocess.run([sys.executable, "-m", "runners", "analyze", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_seed_figures_as_ranges():
    # The seed: 156 allreduces x 50-70 us against a 17.28 ms step.
    r = decompose(17.28, 156, Range(50, 70))
    assert r["allreduce_ms_per_token"]["low"] == pytest.approx(7.8)
    assert r["allreduce_ms_per_token"]["high"] == pytest.approx(10.92)
    assert r["allreduce_share"]["low"] == pytest.approx(0.4514, abs=1e-4)  # 45%
    assert r["allreduce_share"]["high"] == pytest.approx(0.6319, abs=1e-4)  # 63%
    assert r["compute_ms_per_token"]["low"] == pytest.approx(6.36)
    assert r["compute_ms_per_token"]["high"] == pytest.approx(9.48)
    # the high ceiling comes from the high allreduce (least compute left)
    assert r["ceiling_tok_s"]["low"] == pytest.approx(1000 / 9.48)   # ~105
    assert r["ceiling_tok_s"]["high"] == pytest.approx(1000 / 6.36)  # ~157
    assert 100 < r["ceiling_tok_s"]["low"] < r["ceiling_tok_s"]["high"] < 160


def test_numbers_give_numbers():
    r = decompose(17.28, 156, 60)
    assert isinstance(r["allreduce_share"], float)
    # 156 x 60 us = 9.36 ms of a 17.28 ms step: 7.92 ms of compute, at most 126.26 tok/s
    assert r["allreduce_ms_per_token"] == pytest.approx(9.36)
    assert r["compute_ms_per_token"] == pytest.approx(7.92)
    assert r["ceiling_tok_s"] == pytest.approx(126.2626, abs=1e-4)
    assert r["allreduce_share"] == pytest.approx(0.541667, abs=1e-6)


def test_tuple_ranges_and_tok_s_range():
    r = decompose(None, (150, 160), (50, 60), tok_s=(55, 60))
    # 55-60 tok/s: steps of 16.667-18.182 ms; 150 x 50 us = 7.5 ms over the longest step is
    # 41.25 %, 160 x 60 us = 9.6 ms over the shortest 57.6 %
    assert r["step_ms"] == pytest.approx({"low": 16.6667, "high": 18.1818}, abs=1e-4)
    assert r["allreduce_share"]["low"] == pytest.approx(0.4125)
    assert r["allreduce_share"]["high"] == pytest.approx(0.576)
    for key in ("allreduce_ms_per_token", "allreduce_share", "compute_ms_per_token", "ceiling_tok_s"):
        assert r[key]["low"] <= r[key]["high"]


def test_reference_vllm_figures():
    # docs/reference-figures.md: 65 allreduces/token, 276.0 tok/s with NCCL, ~11.3 us per call on rank 0
    r = decompose(None, 65, 11.3, tok_s=276.0)
    # 65 x 11.3 us = 0.7345 ms of a 3.623 ms step (276 tok/s): 20.27 %
    assert r["allreduce_share"] == pytest.approx(0.202722, abs=1e-6)
    assert r["ceiling_tok_s"] > 276.0


@pytest.mark.parametrize("args, message", [
    ((5.0, 156, 50), "impossible"),                    # 7.8 ms of allreduce in a 5 ms step
    ((7.8, 156, 50), "impossible"),                    # share exactly 1: no compute left
    ((17.28, 156, Range(50, 120)), "worst corner"),    # the high corner is impossible
    ((0, 156, 50), "positive"),
    ((17.28, -1, 50), "positive"),
    ((17.28, 156, float("nan")), "finite"),
    ((17.28, 156, (70, 50)), "low"),
])
def test_errors(args, message):
    with pytest.raises(ValueError, match=message):
        decompose(*args)


def test_exactly_one_of_step_and_tok_s():
    with pytest.raises(ValueError, match="exactly one"):
        decompose(17.28, 156, 50, tok_s=57.9)
    with pytest.raises(ValueError, match="exactly one"):
        decompose(None, 156, 50)


@pytest.mark.parametrize("text", ["", "50:", ":70", "50:60:70", "abc", "70:50", "0", "-3", "inf", "1:nan"])
def test_parse_value_rejects(text):
    with pytest.raises(ValueError):
        parse_value(text, "--allreduce-us")


def test_parse_value():
    assert parse_value("17.28") == 17.28
    assert parse_value(" 50:70 ") == Range(50.0, 70.0)


def test_cli_reproduces_the_seed():
    done = run_cli("--step-ms", "17.28", "--allreduce-calls", "156", "--allreduce-us", "50:70")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["inputs"] == {"step_ms": 17.28, "allreduce_calls": 156.0,
                             "allreduce_us": {"low": 50.0, "high": 70.0}}
    assert doc["allreduce_ms_per_token"] == {"low": 7.8, "high": 10.92}
    assert round(doc["allreduce_share"]["low"], 2) == 0.45
    assert round(doc["allreduce_share"]["high"], 2) == 0.63
    assert round(doc["ceiling_tok_s"]["low"]) == 105
    assert round(doc["ceiling_tok_s"]["high"]) == 157
    assert "range_convention" in doc


def test_cli_tok_s_numbers():
    done = run_cli("--tok-s", "57.9", "--allreduce-calls", "156", "--allreduce-us", "60")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["inputs"]["tok_s"] == 57.9
    assert isinstance(doc["allreduce_share"], float)
    assert doc["step_ms"] == pytest.approx(17.2712, abs=1e-4)  # 1000 / 57.9


@pytest.mark.parametrize("argv, message", [
    (["--step-ms", "5", "--allreduce-calls", "156", "--allreduce-us", "50"], "impossible"),
    (["--step-ms", "17.28", "--allreduce-calls", "0", "--allreduce-us", "50"], "positive"),
    (["--step-ms", "17.28", "--allreduce-calls", "156", "--allreduce-us", "50-70"], "malformed"),
])
def test_cli_errors(argv, message):
    done = run_cli(*argv)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_cli_needs_step_or_tok_s():
    done = run_cli("--allreduce-calls", "156", "--allreduce-us", "50")
    assert done.returncode == 2
    both = run_cli("--step-ms", "1", "--tok-s", "1", "--allreduce-calls", "1", "--allreduce-us", "1")
    assert both.returncode == 2
