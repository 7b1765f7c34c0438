"""Launch gaps from a GPU profiler trace (device idle between a decode step's kernels), their
aggregation over ranks and the measurement they become; none from a CPU trace."""
import pytest

from runners import contract
from runners.probes.allreduce_probe import share_measurements
from runners.probes import allreduce as ar
from runners.probes import trace

from .test_allreduce import gpu_trace, write


def test_gap_is_the_kernel_span_minus_busy_kernel_time(tmp_path):
    # known answers (gpu_trace): 8 kernels, 665 us busy, 5 us apart: a 700 us span, 7 gaps of 5 us
    r = trace.parse_trace(write(tmp_path, gpu_trace()))
    assert r["ok"], r["problems"]
    assert r["launch_gap_us_per_step_median"] == pytest.approx(35.0)
    assert r["launch_gap_share"] == pytest.approx(35 / 700, abs=1e-6)


def test_gaps_without_correlation_ids_come_from_the_kernels_tied_by_gpu_annotation(tmp_path):
    r = trace.parse_trace(write(tmp_path, gpu_trace(correlation=False)))
    assert r["step_basis"] == ["kernel_span"] and r["launch_gap_us_per_step_median"] == pytest.approx(35.0)


def test_no_gap_figure_without_device_kernels():
    steps = [trace._Step.__new__(trace._Step)]
    assert trace._launch_gaps(steps, "cpu_op") == [] and trace._launch_gaps(steps, "cpu_op+gloo") == []


def test_ranks_median_becomes_the_launch_gap_measurement():
    ranks = [{"rank": i, "allreduce_share": 0.06, "allreduce_calls_per_step": 3, "allreduce_us_per_call": 20.0,
              "step_ms_median": 0.7, "launch_gap_us_per_step_median": gap} for i, gap in enumerate((30.0, 40.0))]
    profile = ar.aggregate(ranks, expected_calls=3)
    assert profile["launch_gap_ms"] == pytest.approx(0.035)
    out = {m["metric"]: m for m in share_measurements(decode_tok_s=1000 / 0.7, profile=profile, comm=None)}
    assert out[contract.LAUNCH_GAP_MS]["value"] == pytest.approx(0.035)
    assert contract.METRICS[contract.LAUNCH_GAP_MS].unit == "ms"


def test_cpu_traces_have_no_gap_figure():
    ranks = [{"rank": 0, "allreduce_share": 0.5, "allreduce_calls_per_step": 3, "launch_gap_us_per_step_median": None}]
    assert ar.aggregate(ranks)["launch_gap_ms"] is None
    out = share_measurements(decode_tok_s=10.0, profile=ar.aggregate(ranks), comm=None)
    assert contract.LAUNCH_GAP_MS not in {m["metric"] for m in out}
