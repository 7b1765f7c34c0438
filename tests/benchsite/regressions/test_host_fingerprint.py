"""Host fingerprint (GPU model and count, driver, CPU model): gathered by runners/hostinfo.py on
the GPU side, sent with the result, stored on the run; verdicts compare only within it and say so
when the machine changed."""
import pytest

from benchsite.bench.lifecycle import complete
from benchsite.bench.models import Run
from benchsite.regressions.models import Verdict
from benchsite.regressions.series import series_key
from benchsite.regressions.verdicts import verdicts_compute
from runners import contract, hostinfo
from runners.messages import Completion

from .conftest import add_run

H200 = "8x NVIDIA H200, driver 550.54.15, AMD EPYC 9654 96-Core Processor"
A100 = "8x NVIDIA A100-SXM4-80GB, driver 535.104.05, AMD EPYC 7763 64-Core Processor"
HISTORY = [100.0, 102.0, 98.0, 101.0, 99.0]


def test_nvidia_smi_and_cpuinfo_parsed():
    smi = "NVIDIA H200, 550.54.15\nNVIDIA H200, 550.54.15\n"
    assert hostinfo.parse_nvidia_smi(smi) == ("NVIDIA H200", 2, "550.54.15")
    mixed = "NVIDIA H200, 550.54.15\nNVIDIA A100-SXM4-80GB, 550.54.15\n"
    assert hostinfo.parse_nvidia_smi(mixed)[0] == "NVIDIA A100-SXM4-80GB + NVIDIA H200"  # never one uniform model
    assert hostinfo.parse_cpuinfo("processor\t: 0\nmodel name\t: AMD EPYC  9654 96-Core Processor\n") == \
        "AMD EPYC 9654 96-Core Processor"
    info = {"gpu_model": "NVIDIA H200", "gpu_count": 8, "driver": "550.54.15",
            "cpu_model": "AMD EPYC 9654 96-Core Processor"}
    assert hostinfo.fingerprint(info) == H200
    assert hostinfo.fingerprint({**info, "gpu_count": 0}) == "no GPU, AMD EPYC 9654 96-Core Processor"


def test_this_host_is_described_and_passes_the_message_check():
    info = hostinfo.host_info()
    with open("/proc/cpuinfo") as f:
        assert info["cpu_model"] == hostinfo.parse_cpuinfo(f.read())
    assert info["cpu_model"] and isinstance(info["gpu_count"], int)
    assert Completion.from_task([1, {"measurements": [], "host": info}]).result.host.has_fingerprint
    with pytest.raises(contract.ContractError, match="gpu_count"):
        Completion.from_task([1, {"measurements": [], "host": {**info, "gpu_count": "8"}}])


def test_result_stores_fingerprint_and_run_page_shows_it(benchmark, client):
    run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(), batch=add_run(benchmark, 1.0).batch,
                             state=Run.State.RUNNING, worker_host="gpu-7", ref="main")
    host = {"hostname": "gpu-7", "gpu_model": "NVIDIA H200", "gpu_count": 8, "driver": "550.54.15",
            "cpu_model": "AMD EPYC 9654 96-Core Processor"}
    decode = contract.measurement(contract.DECODE_TOK_S, 100.0, samples=[100.0])
    assert complete.run_complete(run_id=run.id, result={"measurements": [decode], "host": host})
    run.refresh_from_db()
    assert (run.host_fingerprint, run.host_info) == (H200, host)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert f'id="run-host-fingerprint">{H200}<' in html


def test_hosts_of_one_fingerprint_share_a_series(benchmark):
    for i, v in enumerate(HISTORY):
        add_run(benchmark, v, host=f"gpu-{i % 2}", fingerprint=H200)
    run = add_run(benchmark, 94.0, host="gpu-9", fingerprint=H200)
    (verdict,) = [v for v in verdicts_compute(run=run) if v.metric == contract.DECODE_TOK_S]
    assert verdict.kind == Verdict.Kind.REGRESSION and len(verdict.baseline_runs) == 5
    assert H200 in verdict.baseline_description and "host changed" not in verdict.note


def test_another_fingerprint_is_never_compared_silently(benchmark):
    for v in HISTORY:
        add_run(benchmark, v, host="gpu-0", fingerprint=H200)
    moved = add_run(benchmark, 94.0, host="gpu-0", fingerprint=A100)  # same host name, new GPUs
    (verdict,) = [v for v in verdicts_compute(run=moved) if v.metric == contract.DECODE_TOK_S]
    assert verdict.kind == Verdict.Kind.NOT_ENOUGH_DATA and verdict.baseline_runs == []
    assert verdict.note.startswith("not comparable: host changed") and H200 in verdict.note and A100 in verdict.note
    assert series_key(moved) != series_key(Run.objects.filter(host_fingerprint=H200).first())
    # Back on the H200 machine: judged against the H200 runs only, and the note says the machine changed.
    back = add_run(benchmark, 94.0, host="gpu-0", fingerprint=H200)
    (verdict,) = [v for v in verdicts_compute(run=back) if v.metric == contract.DECODE_TOK_S]
    assert verdict.kind == Verdict.Kind.REGRESSION and moved.id not in verdict.baseline_runs
    assert f"host changed: the previous run #{moved.id} ran on {A100}" in verdict.note
