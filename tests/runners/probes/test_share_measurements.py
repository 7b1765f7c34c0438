"""One headline share per run, and the ceiling follows it (never three answers on one run)."""
import pytest

from runners.probes.allreduce_probe import share_measurements


def by_metric(rows):
    return {r["metric"]: r for r in rows}


# The imported 2 x H200 run with CUDA graphs and custom allreduce: 293.2 tok/s, the profiler's
# lowest-rank share 8.5 %, 65 calls per step, and the comm probe's 12.2 us per call.
PROFILE = {"calls_per_step": 65, "share_min": 0.085, "share_max": 0.109, "us_per_call_min": 4.3, "ranks": []}
COMM = {"us_per_call": 12.2, "mode": "graph", "notes": []}


def test_the_ceiling_follows_the_profiler_share_and_keeps_the_analytic_one_beside_it():
    rows = by_metric(share_measurements(decode_tok_s=293.2, profile=PROFILE, comm=COMM))
    assert rows["allreduce_share"]["value"] == 0.085
    ceiling = rows["ceiling_tok_s"]
    assert ceiling["value"] == pytest.approx(293.2 / 0.915)          # 320.4, not 381.8
    assert ceiling["details"]["from"] == "profiler"
    analytic_share = 65 * 12.2e-3 / (1000 / 293.2)                   # 0.793 ms of a 3.411 ms step
    assert rows["allreduce_share_analytic"]["value"] == pytest.approx(analytic_share)
    assert ceiling["details"]["by_method"]["analytic"] == pytest.approx(293.2 / (1 - analytic_share))
    assert ceiling["details"]["by_method"]["analytic"] == pytest.approx(381.8, abs=0.5)  # the old headline


def test_without_a_profile_there_is_no_share_and_no_ceiling():
    # the analytic estimate needs the profiler's calls per step; nothing is guessed without it
    assert by_metric(share_measurements(decode_tok_s=100.0, profile=None, comm=COMM)) == {}


def test_a_profile_alone_gives_the_ceiling():
    rows = by_metric(share_measurements(decode_tok_s=50.0, profile={**PROFILE, "share_min": 0.5}, comm=None))
    assert rows["ceiling_tok_s"]["value"] == pytest.approx(100.0)
    assert "allreduce_share_analytic" not in rows
