"""The host sampler of the decode probe (runners.probes.host)."""
from runners.probes import host


def test_steal_and_total_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n")
    assert host.cpu_jiffies(stat) == (35, 1000)
    assert host.cpu_jiffies(tmp_path / "missing") is None


def test_a_steady_host_says_nothing():
    samples = [{"loop_ms": 10.0, "jiffies": (0, 1000)}, {"loop_ms": 11.0, "jiffies": (10, 2000)},
               {"loop_ms": 10.5, "jiffies": (20, 3000)}]
    s = host.summary(samples, [50.0, 60.0])
    assert s == {"loop_ms_min": 10.0, "loop_ms_max": 11.0, "steal_max": 0.01, "unsteady": None}


def test_a_host_that_slows_down_or_steals_is_named_when_the_repeats_spread():
    """The shared H200 host: a fixed loop took 66 ms at one moment and 127 at another, eager
    repeats 38-82 tok/s; CUDA-graph repeats kept 216.5-216.7 tok/s on the same host."""
    loops = [{"loop_ms": 66.0, "jiffies": None}, {"loop_ms": 127.0, "jiffies": None}]
    slow = host.summary(loops, [38.2, 81.1])
    assert slow["steal_max"] is None
    assert slow["unsteady"].startswith("the repeats spread by 112% (38.2-81.1 tok/s)")
    assert "a fixed loop took 66.0-127.0 ms" in slow["unsteady"] and "eager" in slow["unsteady"]
    assert host.summary(loops, [216.5, 216.7])["unsteady"] is None
    stolen = host.summary([{"loop_ms": 10.0, "jiffies": (0, 1000)}, {"loop_ms": 10.0, "jiffies": (200, 2000)}],
                          [40.0, 50.0])
    assert stolen["steal_max"] == 0.2 and "up to 20% of the CPU time" in stolen["unsteady"]


def test_this_host_is_sampled():
    s = host.sample()
    assert s["loop_ms"] > 0
    assert s["jiffies"] is None or s["jiffies"][1] > 0
