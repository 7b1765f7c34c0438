"""The worker's copy bandwidth (the time budget's memory-bandwidth floor) and the weight bytes
per GPU: arithmetic on known inputs, a real host copy, and the floor on the run page."""
import subprocess
import sys
import uuid

import pytest

from runners import contract
from runners.probes import membw
from runners.probes.membw_probe import bandwidth_measurements
from runners.probes.weights_probe import weight_measurements


def test_bandwidth_counts_read_and_write():
    # 256 MiB copied 20 times in 2.5 s: 2 x 256 MiB x 20 / 2.5 s = 4.29 GB/s
    assert membw.bandwidth_bytes_per_s(256 * 2**20, 20, 2.5) == pytest.approx(2 * 256 * 2**20 * 20 / 2.5)
    with pytest.raises(ValueError, match="positive"):
        membw.bandwidth_bytes_per_s(1024, 1, 0.0)


def test_host_copy_takes_the_fastest_repeat_with_an_injected_clock():
    ticks = iter([0.0, 0.5, 1.0, 1.1, 2.0, 2.3])  # three copies: 0.5 s, 0.1 s, 0.3 s
    result = membw.copy_bandwidth(nbytes=1000, iters=3, device="cpu", clock=lambda: next(ticks))
    assert result["device"] == "cpu (host memcpy)"
    assert result["bytes_per_s"] == pytest.approx(2 * 1000 / 0.1)


def test_a_real_host_copy_measures_a_plausible_bandwidth():
    result = membw.copy_bandwidth(nbytes=16 * 2**20, iters=5, device="cpu")
    assert 1e8 < result["bytes_per_s"] < 1e12  # between 0.1 GB/s and 1 TB/s on any host


def test_cuda_asked_for_on_a_host_without_a_gpu_is_an_error(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="torch sees no GPU"):
        membw.copy_bandwidth(nbytes=1024, iters=1, device="cuda")


def test_a_gpu_is_looked_for_by_its_device_nodes(tmp_path):
    assert not membw.gpu_device_node_present(tmp_path)
    (tmp_path / "nvidiactl").touch()
    assert membw.gpu_device_node_present(tmp_path)


def test_auto_on_a_host_without_a_gpu_copies_on_the_host_without_importing_torch():
    code = ("import sys; from runners.probes import membw; membw.GPU_DEVICE_NODES = ('no-such-node',); "
            "r = membw.copy_bandwidth(nbytes=2**20, iters=2); print(r['device'], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "(host", "memcpy)", "False"]


def test_weight_bytes_per_gpu_prefers_safetensors_and_divides_by_tp(tmp_path):
    (tmp_path / "model-00001.safetensors").write_bytes(b"\0" * 3000)
    (tmp_path / "model-00002.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 4000)  # the same weights again: not counted
    (tmp_path / "config.json").write_text("{}")
    assert membw.weight_bytes_per_gpu(tmp_path, 2) == 2000
    assert membw.weight_bytes_per_gpu("meta-llama/Llama-3-8B", 2) is None


def test_measurements_carry_gb_per_s_and_leave_out_a_failed_probe(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 7100)
    out = [*bandwidth_measurements({"bytes_per_s": 4.3e12, "device": "cuda:0"}),
           *weight_measurements(model=str(tmp_path), tensor_parallel_size=1)]
    assert [(m["metric"], m["value"]) for m in out] == [(contract.MEM_BANDWIDTH_GB_S, pytest.approx(4300.0)),
                                                        (contract.WEIGHT_BYTES_PER_GPU, 7100)]
    failed = [*bandwidth_measurements({"error": "RuntimeError: x"}),
              *weight_measurements(model="hub/name", tensor_parallel_size=1)]
    assert failed == []


@pytest.mark.django_db
def test_run_page_floor_and_launch_gaps_from_the_measured_figures(client):
    """The issue's example: 7.1 GB per GPU per token at 4.3 TB/s is a 1.65 ms floor against a
    3.4 ms step (48.6 %); 0.2 ms of launch gaps come out of the rest of the step."""
    from benchsite.bench.models import Benchmark, Measurement, Run, Variant

    benchmark = Benchmark.objects.create(name="floor", slug="floor", model="m", tensor_parallel_size=2)
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="NCCL LL")
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED")
    for metric, value in ((contract.DECODE_TOK_S, 1000 / 3.4), (contract.ALLREDUCE_SHARE, 0.25),
                          (contract.LAUNCH_GAP_MS, 0.2), (contract.MEM_BANDWIDTH_GB_S, 4300.0),
                          (contract.WEIGHT_BYTES_PER_GPU, 7.1e9)):
        Measurement.objects.create(run=run, metric=metric, value=value)
    budget = client.get(f"/runs/{run.pk}/").context["budget"]
    assert budget["floor_ms"] == pytest.approx(7.1e9 / 4.3e12 * 1000) == pytest.approx(1.651, abs=1e-3)
    assert budget["floor_pct"] == pytest.approx(1.651 / 3.4, abs=1e-3)
    assert (budget["allreduce_ms"], budget["gap_ms"]) == (pytest.approx(0.85), 0.2)
    assert budget["rest_ms"] == pytest.approx(3.4 - 0.85 - 0.2)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="budget-gaps">200 us' in page and "48.6%" in page


def test_the_isolated_probe_runs_in_a_child_process_and_reports_json():
    result = membw.copy_bandwidth_isolated()
    on_gpu = result["device"].startswith("cuda:")
    assert result["bytes"] == (membw.GPU_BYTES if on_gpu else membw.HOST_BYTES)
    assert result["bytes_per_s"] > 1e8
