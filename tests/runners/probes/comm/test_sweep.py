"""runners.probes.comm.sweep: the allreduce sweep, on CPU with gloo and two ranks (a few seconds)."""
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners.probes.comm.options import CommError, parse_bytes, parse_protos
from runners.probes.comm.sweep import bandwidth_gbs, busbw_factor, run_sweep, sweep_sizes

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    """One real sweep through the command line, in this process (torch is imported once)."""
    from runners.__main__ import main

    out = tmp_path_factory.mktemp("comm") / "comm.json"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = main(["comm", "--backend", "gloo", "--world-size", "2", "--sizes", "4K,12K,64K",
                   "--dtype", "bf16", "--iters", "8", "--warmup", "2", "--json", "--output", str(out)])
    return SimpleNamespace(returncode=rc, stdout=stdout.getvalue(), stderr=stderr.getvalue()), out


def test_gloo_sweep_json_shape(gloo_run):
    done, out = gloo_run
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert json.loads(out.read_text()) == doc
    assert doc["backend"] == "gloo"
    assert doc["world_size"] == 2
    assert doc["device"] == "cpu"
    assert doc["torch"]
    assert "nccl_version" not in doc
    assert any("graph mode skipped" in n for n in doc["notes"])
    rows = doc["results"]
    assert [r["bytes"] for r in rows] == [4096, 12288, 65536]
    for r in rows:
        assert set(r) >= {"proto", "mode", "bytes", "dtype", "us", "algbw_gbs", "busbw_gbs"}
        assert r["proto"] == "default"
        assert r["mode"] == "eager"  # no CUDA graphs on CPU
        assert r["dtype"] in ("bf16", "fp32")
        assert r["us"] > 0 and r["us_min"] > 0
        assert len(r["us_by_rank"]) == 2
        assert r["us"] == max(r["us_by_rank"])  # the slowest rank, as nccl-tests reports
        assert r["us_min"] <= r["us"] <= r["us_p90"]


def test_bandwidth_known_answers():
    """nccl-tests' definitions on round numbers: 1 MB in 100 us is 10 GB/s of algorithm bandwidth;
    the bus bandwidth is 2(n-1)/n of it: the same at 2 ranks, 15 GB/s at 4, 17.5 GB/s at 8."""
    assert bandwidth_gbs(1_000_000, 100.0, 2) == pytest.approx((10.0, 10.0))
    assert bandwidth_gbs(1_000_000, 100.0, 4) == pytest.approx((10.0, 15.0))
    assert bandwidth_gbs(4096, 2.048, 8) == pytest.approx((2.0, 3.5))


def test_busbw_factor():
    assert busbw_factor(2) == 1.0
    assert busbw_factor(4) == 1.5
    assert busbw_factor(8) == 1.75


def test_sizes_from_hidden_size():
    sizes = sweep_sizes(hidden_size=4096, elem_bytes=2, batch=1, max_bytes=16 << 20)
    assert sizes[0] == 8192 and sizes[-1] == 16 << 20 and len(sizes) == 12
    sizes = sweep_sizes(hidden_size=6144, elem_bytes=2, batch=1, max_bytes=16 << 20)
    assert sizes[0] == 12288  # the 12 KB point of docs/reference-figures.md
    assert sizes[-1] == 12 << 20
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert sweep_sizes(hidden_size=4096, elem_bytes=2, batch=4, max_bytes=32768) == [32768]
    with pytest.raises(CommError, match="above --max-bytes"):
        sweep_sizes(hidden_size=4096, elem_bytes=2, batch=1, max_bytes=4096)


def test_parse_bytes():
    assert parse_bytes("12288") == 12288
    assert parse_bytes("12K") == 12288
    assert parse_bytes("16M") == 16 << 20
    assert parse_bytes("1.5K") == 1536
    for bad in ["0", "-4K", "12X", "K", "", "1.5", "abc"]:
        with pytest.raises(CommError):
            parse_bytes(bad)


def test_parse_protos():
    assert parse_protos("default,LL,LL128,Simple") == ["default", "LL", "LL128", "Simple"]
    assert parse_protos("ll, simple,LL") == ["LL", "Simple"]
    assert parse_protos("custom,LL") == ["custom", "LL"]
    for bad in ["LL256", "", "ring"]:
        with pytest.raises(CommError):
            parse_protos(bad)


@pytest.mark.parametrize("kwargs, message", [
    (dict(backend="gloo", protos=["LL"]), "NCCL only"),
    (dict(backend="gloo", world_size=1), "at least 2"),
    (dict(backend="gloo", dtype="int8"), "unknown dtype"),
    (dict(backend="gloo", dtype="fp32", sizes=[6]), "multiples"),
    (dict(backend="gloo", iters=0), "at least 1"),
    (dict(backend="mpi"), "unknown backend"),
    (dict(backend="gloo", protos=["custom"]), "interleaved only"),
])
def test_sweep_argument_errors(kwargs, message):
    with pytest.raises(CommError, match=message):
        run_sweep(**kwargs)


def test_nccl_without_enough_gpus():
    import torch
    if torch.cuda.is_available() and torch.cuda.device_count() >= 64:
        pytest.skip("host has 64 GPUs")
    with pytest.raises(CommError, match="GPUs|no NCCL"):
        run_sweep(backend="nccl", world_size=64)


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "12Q"], "bad size"),
    (["--sizes", "0"], "bad size"),
    (["--sizes", ","], "empty"),
    (["--sizes", "3", "--dtype", "bf16"], "multiples"),
    (["--protos", "LL129"], "unknown NCCL protocol"),
    (["--protos", "LL"], "NCCL only"),
    (["--max-bytes", "1K"], "above --max-bytes"),
    (["--dtype", "int4"], "unknown dtype"),
])
def test_cli_errors(argv, message, capsys):
    from runners.__main__ import main

    rc = main(["comm", "--backend", "gloo", "--world-size", "2", *argv])
    captured = capsys.readouterr()
    assert rc == 2, captured.out
    assert message in captured.err
    assert captured.out == ""


def test_runners_modules_do_not_import_django():
    code = ("import sys, runners.probes.comm.cli, runners.probes.comm.latency, runners.analysis.analyze; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _sweep_in_a_daemon(path):
    from runners.probes.comm.sweep import run_sweep

    try:
        doc = run_sweep(backend="gloo", sizes=[1024], dtype="fp32", iters=2, warmup=0, graph=False, timeout_s=60)
        Path(path).write_text(json.dumps({"results": len(doc["results"]), "notes": doc["notes"]}))
    except BaseException as e:  # noqa: BLE001 - the parent reads what went wrong
        Path(path).write_text(json.dumps({"error": f"{type(e).__name__}: {e}"}))


def test_the_probe_runs_inside_a_daemonic_process(tmp_path):
    """A Celery prefork worker's child is daemonic; the first GPU run through the service lost
    every comm probe to "daemonic processes are not allowed to have children"."""
    import multiprocessing

    out = tmp_path / "doc.json"
    child = multiprocessing.get_context("fork").Process(target=_sweep_in_a_daemon, args=(str(out),), daemon=True)
    child.start()
    child.join(90)
    doc = json.loads(out.read_text())
    assert "error" not in doc, doc
    assert doc["results"] >= 1
