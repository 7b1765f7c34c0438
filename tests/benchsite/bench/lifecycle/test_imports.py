"""`manage.py bench_import`: an offline GPU host's ladder result becomes one batch of runs."""
import json

import pytest
from django.core.management import CommandError, call_command

from benchsite.bench.models import Benchmark, Run

pytestmark = pytest.mark.django_db


def _measure(metric, value, unit="", direction="higher"):
    return {"metric": metric, "value": value, "unit": unit, "direction": direction, "samples": [value],
            "ci_low": None, "ci_high": None, "details": {}}


def _greedy(ids):
    return {"kind": "probe_json", "name": "greedy.json",
            "content": json.dumps({"token_ids": ids, "logprobs": [{f"token_id:{i}": 0.0} for i in ids]})}


def _ladder_result():
    ids = list(range(50, 80))
    return {
        "format": "decode-bench-ladder/1",
        "benchmark": {"name": "8B TP2", "slug": "8b-tp2", "model": "/tmp/models/llama-8b", "tensor_parallel_size": 2,
                      "max_tokens": 256, "repeats": 3},
        "variants": [],
        "host": {"hostname": "h200-box", "gpus": ["NVIDIA H200", "NVIDIA H200"]},
        "runs": [
            {"variant": {"name": "eager", "flags": ["--enforce-eager"], "env": {}, "is_reference": True},
             "state": "SUCCEEDED", "started_at": 1764480000, "finished_at": 1764480200,
             "result": {"measurements": [_measure("decode_tok_s", 49.5, "tok/s")], "artifacts": [_greedy(ids)]}},
            {"variant": {"name": "graphs", "flags": [], "env": {}},
             "state": "SUCCEEDED", "started_at": 1764480200, "finished_at": 1764480400,
             "result": {"measurements": [_measure("decode_tok_s", 297.9, "tok/s"),
                                         _measure("allreduce_share", 0.099, "", "lower")],
                        "artifacts": [_greedy(ids)]}},
            {"variant": {"name": "broken", "flags": ["--bad"], "env": {}},
             "state": "FAILED", "error": "starting engine: unrecognized arguments: --bad", "artifacts": []},
        ],
    }


def test_import_creates_one_batch_with_measurements_and_verdicts(tmp_path, capsys):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(_ladder_result()))

    call_command("bench_import", str(path), "--pool", "h200x2")

    benchmark = Benchmark.objects.get(slug="8b-tp2")
    assert benchmark.gpu_pool == "h200x2" and benchmark.tensor_parallel_size == 2
    assert [v.name for v in benchmark.variants.all()] == ["eager", "graphs", "broken"]
    runs = {r.variant.name: r for r in Run.objects.all()}
    assert len({r.batch for r in runs.values()}) == 1
    assert {r.trigger for r in runs.values()} == {"import"}
    assert runs["graphs"].state == "SUCCEEDED" and runs["graphs"].worker_host == "h200-box"
    assert runs["graphs"].measurements.get(metric="decode_tok_s").value == 297.9
    assert runs["graphs"].measurements.get(metric="correct").details["verdict"] == "identical"
    assert runs["broken"].state == "FAILED" and "unrecognized" in runs["broken"].error
    assert runs["eager"].started_at.timestamp() == 1764480000
    assert "imported 3 runs" in capsys.readouterr().out


def test_import_refuses_a_file_of_another_kind(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CommandError, match="not a ladder result file"):
        call_command("bench_import", str(path))
    assert Run.objects.count() == 0


def test_import_sets_builds_on_from_the_ladder_file(tmp_path):
    from benchsite.bench.models import Variant

    data = _ladder_result()
    data["variants"] = [{"name": "eager"}, {"name": "graphs"}, {"name": "broken", "builds_on": "eager"}]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    call_command("bench_import", str(path))
    bases = {v.name: v.builds_on and v.builds_on.name for v in Variant.objects.filter(benchmark__slug="8b-tp2")}
    assert bases == {"eager": None, "graphs": None, "broken": "eager"}


def test_import_refuses_builds_on_of_an_unknown_variant_and_imports_nothing(tmp_path):
    data = _ladder_result()
    data["runs"][1]["variant"]["builds_on"] = "cuda graphs"
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"variant 'graphs' builds_on 'cuda graphs': not another variant of 8b-tp2"):
        call_command("bench_import", str(path))
    assert not Run.objects.exists() and not Benchmark.objects.exists()
