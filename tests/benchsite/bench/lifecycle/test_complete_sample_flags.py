"""Flagged repeats and toggle evidence, from a job's result to the pages: each stored sample keeps
its flag and no flagged one is shown or used as a sample; `took_effect` is stored on the run
and shown on the run page and the ladder."""
import pytest
from django.urls import reverse

from benchsite.bench.lifecycle import claim, complete, trigger
from benchsite.bench.models import Benchmark, Run
from runners.analysis.evidence import took_effect
from runners.contract import Measurement
from runners.probes.decode_probe import decode_measurements

pytestmark = pytest.mark.django_db

# The probe's result for 5 repeats: 2 held back to one burst (absurd rates), 3 clean.
DECODE = {
    "decode_tok_s": 190.0, "decode_tok_s_ci": [183.0, 193.0], "ttft_ms": 41.0, "warnings": [], "notes": [],
    "repeats_made": 5, "repeats_clean": 3, "itl_ms": {"p50": 5.2, "p90": 5.9, "p99": 7.0},
    "samples": [
        {"decode_tok_s": 23023.0, "ttft_ms": 900.0, "n_tokens": 64, "flag": "burst", "ttft_flag": "burst"},
        {"decode_tok_s": 193.0, "ttft_ms": 40.0, "n_tokens": 64, "flag": "", "ttft_flag": ""},
        {"decode_tok_s": 183.0, "ttft_ms": 41.0, "n_tokens": 64, "flag": "", "ttft_flag": ""},
        {"decode_tok_s": 7571.0, "ttft_ms": 700.0, "n_tokens": 64, "flag": "burst", "ttft_flag": "burst"},
        {"decode_tok_s": 190.0, "ttft_ms": 45.0, "n_tokens": 64, "flag": "", "ttft_flag": "held_back"},
    ],
}
CPU_EAGER_LOG = "\n".join([
    "(APIServer pid=1) WARNING 11-30 10:37:23 [vllm.py:1703] Enforce eager set, disabling torch.compile, CUDAGraphs",
    "(EngineCore pid=2) INFO 11-30 10:37:42 [kv_cache_utils.py:2327] CPU KV cache size: 262,144 tokens",
])


@pytest.fixture
def run(monkeypatch):
    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", lambda *a, **k: type("R", (), {"id": "task-1"})())
    b = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", max_tokens=64, repeats=5)
    trigger.variant_create(benchmark=b, name="eager", flags=["--enforce-eager"], env={"NCCL_PROTO": "LL"})
    run = trigger.runs_trigger(benchmark=b, trigger="api", variants=[b.variants.get()])[0]
    claim.run_claim(run_id=run.id, task_id="t", worker_host="h")
    evidence = took_effect(CPU_EAGER_LOG, engine_args=["--enforce-eager"], engine_env={"NCCL_PROTO": "LL"},
                           tensor_parallel_size=1)
    assert complete.run_complete(run_id=run.id, result={"measurements": decode_measurements(DECODE),
                                                        "took_effect": evidence})
    return Run.objects.get(id=run.id)


def test_each_sample_is_stored_with_its_flag(run):
    m = run.measurements.get(metric="decode_tok_s")
    assert m.samples == [23023.0, 193.0, 183.0, 7571.0, 190.0]
    assert m.sample_flags == ["burst", "", "", "burst", ""]
    assert run.measurements.get(metric="ttft_ms").sample_flags == ["burst", "", "", "burst", "held_back"]
    assert run.took_effect["checks"][0]["setting"] == "execution mode"


def test_flags_that_do_not_line_up_are_dropped(run):
    m = {"metric": "decode_tok_s", "value": 1.5, "samples": [1.0, 2.0], "sample_flags": ["burst"]}
    assert Measurement.from_dict(m).clean_sample_flags() == []


def test_run_api_and_page_show_clean_samples_only(client, run):
    decode = next(m for m in client.get(reverse("bench:api-run", args=[run.id])).json()["measurements"]
                  if m["metric"] == "decode_tok_s")
    assert decode["samples"] == [193.0, 183.0, 190.0]
    assert decode["sample_flags"] == ["burst", "", "", "burst", ""]
    html = client.get(reverse("bench:run", args=[run.id])).content.decode()
    assert "+ 2 burst flagged" in html
    assert "23023" not in html and "7571" not in html
    # the took-effect table: eager applied, NCCL_PROTO has no effect on a CPU TP=1 engine
    assert 'id="took-effect"' in html
    assert "execution mode" in html and "no effect here" in html and "Enforce eager set" in html


def test_ladder_shows_what_took_effect(client, run):
    html = client.get(reverse("bench:benchmark", args=["tiny"])).content.decode()
    assert "<th>took effect</th>" in html
    assert "1 applied, 1 no effect here" in html


def test_chart_point_is_the_median_of_the_clean_repeats(client, run):
    """193, 183, 190 clean (23,023 and 7,571 flagged): the chart shows 190, the CI 183-193."""
    chart = client.get(reverse("bench:api-chart", args=["tiny"])).json()
    (point,) = chart["variants"][0]["points"]
    assert (point["y"], point["lo"], point["hi"]) == (190.0, 183.0, 193.0)
