"""Imports that `make run` shows: the service's own 2 x H200 run (an export of /api/runs/, read by
benchsite/bench/lifecycle/runs_export.py) under its own slug, and the runners' ladder file, each run at the
time it was measured and with one headline ceiling."""
import json
from datetime import datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchsite.bench.definitions.demo import H200_LADDER, H200_SERVICE_NOTE, demo_gpu_history_ensure
from benchsite.bench.models import Annotation, Benchmark, Run

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[4]
EXPORT = ROOT / "docs" / "data" / "service-h200x2-runs.json"
CONFIG = ROOT / "benchmarks" / "gpu" / "service-h200x2.yaml"


def _exported() -> dict:
    return {r["variant"]["name"]: r for r in json.loads(EXPORT.read_text())["runs"]}


def test_the_service_export_imports_under_its_own_slug_as_measured(tmp_path, client, capsys):
    call_command("bench_apply", str(CONFIG))
    call_command("bench_import", str(EXPORT), "--note", "fusion supersedes the NCCL steps")

    benchmark = Benchmark.objects.get(slug="llama8b-tp2-h200x2-service")
    runs = {r.variant.name: r for r in Run.objects.filter(benchmark=benchmark).select_related("variant")}
    exported = _exported()
    assert set(runs) == set(exported) and len({r.batch for r in runs.values()}) == 1
    for name, run in runs.items():
        source = exported[name]
        # the times it was measured, in order (created before started before finished)
        assert run.created_at == datetime.fromisoformat(source["created_at"])
        assert run.started_at == datetime.fromisoformat(source["started_at"])
        assert run.finished_at == datetime.fromisoformat(source["finished_at"])
        assert run.created_at <= run.started_at <= run.finished_at
        assert run.state == "SUCCEEDED" and run.trigger == "import"
        stored = dict(run.measurements.values_list("metric", "value"))
        assert stored["decode_tok_s"] == next(m["value"] for m in source["measurements"] if m["metric"] == "decode_tok_s")
        assert run.took_effect["summary"] == source["took_effect"]["summary"]
        assert run.host_fingerprint and "NVIDIA H200" in run.host_fingerprint
    graphs = runs["cuda graphs (custom allreduce)"]
    assert graphs.measurements.get(metric="correct").details["verdict"] == "drift"  # the service's judgement kept
    ttft = runs["eager"].measurements.get(metric="ttft_ms")
    assert ttft.sample_flags == ["", "held_back", "held_back"]  # every repeat, with the probe's flags
    assert "imported 5 runs into llama8b-tp2-h200x2-service" in capsys.readouterr().out

    # the waterfall: LL and Simple sit level with CUDA graphs, and the page says why
    response = client.get(f"/b/{benchmark.slug}/waterfall/")
    bars = response.context["chart_data"]
    assert [b["label"] for b in bars] == ["eager", "cuda graphs (custom allreduce)", "NCCL LL (custom allreduce off)",
                                          "NCCL Simple (custom allreduce off)", "allreduce+RMSNorm fusion"]
    assert all(abs(b["gain_pct"]) < 0.01 for b in bars[2:])
    assert "fusion supersedes the NCCL steps" in response.content.decode()
    assert Annotation.objects.get(benchmark=benchmark).starts_at == runs["eager"].created_at


def test_an_export_needs_its_benchmark_here_first(tmp_path):
    with pytest.raises(CommandError, match=r"no benchmark 'llama8b-tp2-h200x2-service' here: apply its "
                                           r"benchmarks-as-code file first"):
        call_command("bench_import", str(EXPORT))
    assert not Run.objects.exists()


def test_an_export_with_a_variant_the_benchmark_lacks_imports_nothing(tmp_path):
    call_command("bench_apply", str(CONFIG))
    data = json.loads(EXPORT.read_text())
    data["runs"][2]["variant"]["name"] = "NCCL LL128"
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"has no variants \['NCCL LL128'\]"):
        call_command("bench_import", str(path))
    assert not Run.objects.exists()


def test_the_ladder_file_keeps_its_times_and_one_headline_ceiling(client):
    """The runners' file stored the analytic ceiling (381.8) for CUDA graphs; the headline follows
    the profiler's share, 293.19 / (1 - 0.084778) = 320.3, the same everywhere on the run page."""
    demo_gpu_history_ensure()
    ladder = json.loads(H200_LADDER.read_text())
    runs = {r.variant.name: r for r in Run.objects.filter(benchmark__slug="llama8b-tp2-h200x2")}
    for entry in ladder["runs"]:
        run = runs[entry["variant"]["name"]]
        assert run.created_at.timestamp() == pytest.approx(entry["started_at"])
        assert run.created_at <= run.started_at <= run.finished_at
        assert run.finished_at.timestamp() == pytest.approx(entry["finished_at"])
    graphs = runs["cuda graphs (custom allreduce)"]
    ceiling = graphs.measurements.get(metric="ceiling_tok_s")
    assert ceiling.value == pytest.approx(293.189 / (1 - 0.084778), abs=0.01)
    assert ceiling.details["from"] == "profiler" and ceiling.details["by_method"]["analytic"] == pytest.approx(381.77, abs=0.01)

    page = client.get(f"/runs/{graphs.pk}/")
    budget = page.context["budget"]
    assert budget["ceiling_tok_s"] == pytest.approx(ceiling.value)
    assert budget["allreduce_ms"] == pytest.approx(0.084778 * 1000 / 293.189)
    html = page.content.decode()
    assert html.count("320.3 tok/s") >= 3  # headline, the profiler's row, the measurements table
    assert "289.2 us · 8.5%" in html  # the one allreduce time per step, 0.289 ms
    estimates = html.split('id="budget-estimates"')[1].split("</table>")[0]
    # the other methods only as estimates: the profiler's calls x us (0.264 ms) and the comm probe's
    assert "264.2 us" in estimates and "381.8 tok/s" in estimates and estimates.count("estimate") == 2

    # the service's run beside it, under its own slug, imported once
    assert Benchmark.objects.get(slug="llama8b-tp2-h200x2-service").runs.count() == 5
    demo_gpu_history_ensure()
    assert Run.objects.count() == 4 + 5
    assert Annotation.objects.get().text == H200_SERVICE_NOTE
