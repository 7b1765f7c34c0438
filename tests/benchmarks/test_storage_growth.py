"""benchmarks/storage_growth.py: its arithmetic, and its --measured reading of a service's
database (sizes per kind and the share of runs the keep rules protect)."""
import importlib.util
from pathlib import Path

import pytest

from tests.benchsite.bench.retention.history import FILES, KEPT_BY, build
from tests.benchsite.bench.storage.conftest import fs_storage  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("storage_growth", ROOT / "benchmarks" / "storage_growth.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


growth = _load()


def test_the_policy_bounds_a_kind_to_its_days_plus_the_protected_runs():
    rows = growth.growth({"profiler_trace": (100.0, 0.5), "server_log": (10.0, 1.0), "build_log": (1.0, 1.0),
                          "probe_json": (2.0, 1.0)}, runs_per_day=10, traces_days=30, logs_days=0,
                         protected_share=0.1, horizon_days=100)
    trace = rows["profiler_trace"]
    assert trace["per_day_mb"] * 1e6 == 500.0
    assert trace["year_with_policy_gb"] * 1e9 == pytest.approx(500 * 30 + 500 * 0.1 * 70)
    assert rows["server_log"]["year_with_policy_gb"] == rows["server_log"]["year_no_policy_gb"]  # 0 days: forever
    assert rows["probe_json"]["kept_days"] == "forever"


def test_the_h200_ladder_gives_logs_and_probe_json_per_run_and_the_traces_their_stated_size():
    sizes = growth.ladder_sizes(growth.LADDER, trace_bytes=5e6)
    assert 40e3 < sizes["server_log"][0] < 50e3 and sizes["server_log"][1] == 1.0  # 4 runs, about 45 KB each
    assert 90e3 < sizes["probe_json"][0] < 110e3  # decode, greedy, allreduce and comm JSON
    assert sizes["build_log"] == (0.0, 0.0) and sizes["profiler_trace"] == (5e6, 1.0)


@pytest.mark.django_db
def test_measured_reads_sizes_per_kind_and_the_protected_share(fs_storage):  # noqa: F811
    runs = build()
    sizes, share, total = growth.measured()
    assert total == len(runs)
    assert sizes["server_log"] == (len(dict((k, c) for k, _, c in FILES)["server_log"]), 1.0)
    assert share == pytest.approx(sum(map(len, KEPT_BY.values())) / len(runs))
