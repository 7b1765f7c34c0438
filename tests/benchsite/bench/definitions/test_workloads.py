"""A benchmark's workload points as bench_apply's YAML and the admin take them: exactly
`workloads: [{concurrency, prompt_tokens, max_tokens, request_rate}]`; a bad entry is refused
with its number and nothing is written; the points reach the job spec the worker runs."""
import io
import textwrap

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from benchsite.bench.lifecycle import dispatch, trigger
from benchsite.bench.models import Benchmark

pytestmark = pytest.mark.django_db

GOOD = """\
benchmarks:
  - slug: tiny
    name: Tiny
    model: m
    max_tokens: 64
    engine_args: ["--max-model-len", "9000"]
    workloads:
      - {concurrency: 1, max_tokens: 64}
      - {concurrency: 16, prompt_tokens: 8192, max_tokens: 256}
      - {concurrency: 1, prompt_tokens: 128, max_tokens: 256, request_rate: 4}
    variants:
      - {name: eager}
"""


def apply(tmp_path, text):
    path = tmp_path / "bench.yaml"
    path.write_text(textwrap.dedent(text))
    out = io.StringIO()
    call_command("bench_apply", str(path), stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_yaml_points_are_stored_and_reach_the_job_spec(tmp_path, sent):
    apply(tmp_path, GOOD)
    benchmark = Benchmark.objects.get(slug="tiny")
    assert [p.id for p in benchmark.points] == ["c1-p0-m64", "c16-p8192-m256", "c1-p128-m256-r4"]
    assert benchmark.default_point == "c1-p0-m64"
    assert "update" not in apply(tmp_path, GOOD)  # idempotent
    run = trigger.runs_trigger(benchmark=benchmark, trigger="api", variants=[benchmark.variants.get()])[0]
    assert [w["concurrency"] for w in dispatch.run_spec(run)["workloads"]] == [1, 16, 1]


@pytest.mark.parametrize("entry, message", [
    ("{concurrency: 0, max_tokens: 8}", "workloads: workload point 3: concurrency 0 is not a whole number from 1 to 1024"),
    ("{concurrency: 2048, max_tokens: 8}", "workload point 3: concurrency 2048 is not a whole number"),
    ("{concurrency: 2, max_tokens: 8, batch: 4}", "workload point 3: unknown key 'batch'"),
    ("{concurrency: 2, prompt_tokens: -5, max_tokens: 8}", "workload point 3: prompt_tokens -5 is not a whole number"),
    ("{concurrency: 2, prompt_tokens: 9000, max_tokens: 256}",
     "workload point 3 (c2-p9000-m256): 9256 tokens per request exceed the model's context, --max-model-len 9000"),
    ("{concurrency: 2, max_tokens: 8, request_rate: -1}", "request_rate -1 is not a number of requests per second"),
])
def test_a_bad_point_is_refused_by_its_number_and_nothing_is_written(tmp_path, entry, message):
    text = GOOD.replace("{concurrency: 1, prompt_tokens: 128, max_tokens: 256, request_rate: 4}", entry)
    with pytest.raises(CommandError) as info:
        apply(tmp_path, text)
    assert message in str(info.value) and "benchmarks[0] (tiny)" in str(info.value)
    assert not Benchmark.objects.exists()


def test_the_admin_form_checks_the_points():
    benchmark = Benchmark(name="t", slug="t", model="m", workloads=[{"concurrency": 0, "max_tokens": 8}])
    with pytest.raises(ValidationError) as info:
        benchmark.full_clean()
    assert "concurrency 0" in str(info.value.message_dict["workloads"])
    Benchmark(name="t", slug="t", model="m", workloads=[]).full_clean()  # none: the single point


def test_a_trigger_of_a_benchmark_with_bad_points_is_refused_before_any_engine_starts(sent):
    from benchsite.bench.lifecycle.trigger import TriggerError

    benchmark = Benchmark.objects.create(name="t", slug="t", model="m", engine_args=["--max-model-len", "1024"],
                                         workloads=[{"concurrency": 4, "prompt_tokens": 2048, "max_tokens": 8}])
    trigger.variant_create(benchmark=benchmark, name="eager", flags=[], env={})
    with pytest.raises(TriggerError, match="exceed the model's context, --max-model-len 1024"):
        trigger.runs_trigger(benchmark=benchmark, trigger="api")
    assert not benchmark.runs.exists() and sent == []
