"""`manage.py bench_apply`: the issue's example file, idempotence, dry run, clear errors."""
import io
from pathlib import Path
import textwrap

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchsite.bench.definitions.demo import demo_benchmark_ensure
from benchsite.bench.models import Benchmark, EngineSource, Variant
from benchsite.integrations.models import RepoWatch

pytestmark = pytest.mark.django_db

EXAMPLE = """\
benchmarks:
  - slug: tiny-llama-cpu
    name: Tiny Llama on CPU
    model: var/tiny-model
    gpu_pool: cpu
    engine: {repo: https://github.com/vllm-project/vllm.git}
    variants:
      - {name: eager, flags: ["--enforce-eager"], reference: true}
      - {name: compiled}
watches:
  - repo: https://github.com/vllm-project/vllm.git
    branches: ["main", "perf/*"]
    benchmarks: [tiny-llama-cpu]
    secret_env: BENCH_SECRET_VLLM
"""


def apply(tmp_path, text, *args):
    path = tmp_path / "bench.yaml"
    path.write_text(textwrap.dedent(text))
    out = io.StringIO()
    call_command("bench_apply", str(path), *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def snapshot():
    return (
        list(Benchmark.objects.values_list("slug", "name", "model", "gpu_pool", "engine_source__repo_url")),
        list(Variant.objects.values_list("benchmark__slug", "position", "name", "flags", "is_reference")),
        list(RepoWatch.objects.values_list("repo_key", "branches", "secret_env", "benchmarks__slug")),
        EngineSource.objects.count(),
    )


def test_the_issue_example_creates_benchmark_ladder_engine_and_watch(tmp_path):
    out = apply(tmp_path, EXAMPLE)
    assert "create benchmark tiny-llama-cpu" in out and "5 change(s) applied" in out
    assert snapshot() == (
        [("tiny-llama-cpu", "Tiny Llama on CPU", "var/tiny-model", "cpu", "https://github.com/vllm-project/vllm.git")],
        [("tiny-llama-cpu", 1, "eager", ["--enforce-eager"], True), ("tiny-llama-cpu", 2, "compiled", [], False)],
        [("github.com/vllm-project/vllm", ["main", "perf/*"], "BENCH_SECRET_VLLM", "tiny-llama-cpu")],
        1,
    )


def test_applying_twice_changes_nothing(tmp_path):
    apply(tmp_path, EXAMPLE)
    before = snapshot()
    assert apply(tmp_path, EXAMPLE).strip() == "no changes"
    assert snapshot() == before


def test_a_settings_change_is_annotated_on_the_charts_and_a_rename_is_not(tmp_path):
    """Runs after a change of what moves a figure are a new series (regressions/series.py): every
    chart of the benchmark says where, once per apply that changed them."""
    from benchsite.bench.models import Annotation

    apply(tmp_path, EXAMPLE)
    assert not Annotation.objects.exists()
    apply(tmp_path, EXAMPLE.replace("Tiny Llama on CPU", "Tiny Llama"))  # not a setting
    assert not Annotation.objects.exists()
    changed = EXAMPLE.replace("    gpu_pool: cpu\n", "    gpu_pool: cpu\n    max_tokens: 64\n    engine_args: [\"--max-num-seqs\", \"4\"]\n")
    apply(tmp_path, changed.replace('flags: ["--enforce-eager"]', 'flags: ["--enforce-eager", "--block-size", "32"]'))
    notes = list(Annotation.objects.values_list("text", "benchmark__slug"))
    assert notes == [
        ("settings changed (benchmark: max_tokens, engine_args): a new series from here (bench_apply)", "tiny-llama-cpu"),
        ("settings changed (variant eager: flags): a new series from here (bench_apply)", "tiny-llama-cpu")]
    assert Annotation.objects.filter(starts_at__isnull=False).count() == 2
    apply(tmp_path, changed.replace('flags: ["--enforce-eager"]', 'flags: ["--enforce-eager", "--block-size", "32"]'))
    assert Annotation.objects.count() == 2


def test_dry_run_prints_the_changes_and_writes_nothing(tmp_path):
    out = apply(tmp_path, EXAMPLE, "--dry-run")
    assert "would create benchmark tiny-llama-cpu" in out
    assert "would create watch github.com/vllm-project/vllm" in out
    assert snapshot() == ([], [], [], 0)
    apply(tmp_path, EXAMPLE)
    changed = EXAMPLE.replace('"main", "perf/*"', '"main"').replace("name: Tiny Llama on CPU", "name: Tiny")
    out = apply(tmp_path, changed, "--dry-run")
    assert "would update benchmark tiny-llama-cpu: name: 'Tiny Llama on CPU' -> 'Tiny'" in out
    assert "would update watch github.com/vllm-project/vllm: branches: ['main', 'perf/*'] -> ['main']" in out
    assert Benchmark.objects.get().name == "Tiny Llama on CPU"


def test_reordering_the_ladder_and_reusing_the_engine_by_any_url_form(tmp_path):
    apply(tmp_path, EXAMPLE)
    reordered = EXAMPLE.replace("https://github.com/vllm-project/vllm.git}", "git@github.com:vllm-project/vllm.git}")
    reordered = reordered.replace(
        '      - {name: eager, flags: ["--enforce-eager"], reference: true}\n      - {name: compiled}\n',
        '      - {name: compiled}\n      - {name: nccl-ll, env: {NCCL_PROTO: LL}}\n'
        '      - {name: eager, flags: ["--enforce-eager"], reference: true}\n')
    out = apply(tmp_path, reordered)
    assert "create variant tiny-llama-cpu/nccl-ll at position 2" in out
    assert list(Variant.objects.values_list("position", "name")) == [(1, "compiled"), (2, "nccl-ll"), (3, "eager")]
    assert EngineSource.objects.count() == 1  # the ssh form names the same repository
    assert apply(tmp_path, reordered).strip() == "no changes"


@pytest.mark.parametrize("text, message", [
    ("benchmarks:\n  - {slug: x, name: X, model: m, colour: red}\n", "benchmarks[0] (x): unknown fields ['colour']"),
    ("benchmarks:\n  - {slug: x, name: X, model: m, max_tokens: 1}\n", "max_tokens: Ensure this value is greater"),
    ("benchmarks:\n  - {slug: x, name: X, model: m, gpu_pool: 'GPU Pool'}\n", "gpu_pool: Use lowercase"),
    ("benchmarks:\n  - {slug: x, name: X, model: m, engine_args: '--enforce-eager'}\n", "engine_args must be a list"),
    ("benchmarks:\n  - {slug: x, name: X, model: m, variants: [{name: a, is_reference: true}]}\n",
     "unknown fields ['is_reference']; allowed: ['builds_on', 'env', 'flags', 'name', 'reference']"),
    ("benchmarks:\n  - {slug: x, name: X, model: m, engine: {url: 'https://github.com/a/b'}}\n",
     "engine must be {repo: URL}"),
    ("benchmarks:\n  - {slug: x, name: X, model: m}\nwatches:\n  - {repo: 'https://github.com/a/b', "
     "branches: [main], benchmarks: [x], secret_env: S}\n", "runs the installed engine, not github.com/a/b"),
    ("watches:\n  - {repo: 'https://github.com/a/b', branches: [main], benchmarks: [x], secret_env: lower}\n",
     "secret_env: An environment variable name"),
    ("watches:\n  - {repo: 'ftp://example.com/a/b', branches: [main], benchmarks: [x], secret_env: S}\n",
     "is not a repository URL"),
    ("watches:\n  - {repo: 'https://github.com/a/b', branches: main, benchmarks: [x], secret_env: S}\n",
     "branches: a list of 1 to"),
    ("benches: []\n", "unknown top-level keys ['benches']"),
    ("benchmarks: [\n", "not valid YAML"),
])
def test_bad_files_are_refused_with_a_clear_error_and_write_nothing(tmp_path, text, message):
    with pytest.raises(CommandError) as info:
        apply(tmp_path, text)
    assert message in str(info.value)
    assert snapshot() == ([], [], [], 0)


def test_a_repository_watched_twice_is_refused(tmp_path):
    twice = EXAMPLE + "  - {repo: 'git@github.com:vllm-project/vllm.git', branches: [x], " \
                      "benchmarks: [tiny-llama-cpu], secret_env: OTHER}\n"
    with pytest.raises(CommandError, match="watched twice"):
        apply(tmp_path, twice)
    assert snapshot() == ([], [], [], 0)


def test_the_demo_is_applied_from_demo_yaml_idempotently(settings, tmp_path):
    settings.BENCH_TINY_MODEL_DIR = tmp_path / "tiny-model"
    benchmark = demo_benchmark_ensure()
    assert (benchmark.slug, benchmark.model, benchmark.engine_source) == (
        "tiny-llama-cpu", str(tmp_path / "tiny-model"), None)
    assert list(benchmark.variants.values_list("name", "flags", "is_reference")) == [
        ("eager", ["--enforce-eager"], True), ("compiled", [], False)]
    before = snapshot()
    demo_benchmark_ensure()
    assert snapshot() == before


BUILDS_ON = """\
benchmarks:
  - slug: h200
    name: H200 ladder
    model: /models/llama-8b
    variants:
      - {name: eager, reference: true}
      - {name: CUDA graphs}
      - {name: NCCL LL, env: {NCCL_PROTO: LL}}
      - {name: fused, builds_on: CUDA graphs}
"""


def _bases():
    return {v.name: v.builds_on.name if v.builds_on else None
            for v in Variant.objects.filter(benchmark__slug="h200").select_related("builds_on")}


def test_builds_on_names_the_step_a_variant_builds_on_and_is_idempotent(tmp_path):
    out = apply(tmp_path, BUILDS_ON)
    assert "update variant h200/fused: builds_on: the previous step -> CUDA graphs" in out
    assert _bases() == {"eager": None, "CUDA graphs": None, "NCCL LL": None, "fused": "CUDA graphs"}
    assert "no changes" in apply(tmp_path, BUILDS_ON).lower()
    out = apply(tmp_path, BUILDS_ON.replace("{name: fused, builds_on: CUDA graphs}", "{name: fused}"))
    assert "builds_on: CUDA graphs -> the previous step" in out and _bases()["fused"] is None


@pytest.mark.parametrize("base", ["fused", "nope", "[1]"])
def test_builds_on_must_name_another_variant_of_the_ladder(tmp_path, base):
    with pytest.raises(CommandError, match=r"variants\[3\]: builds_on must name another variant of this ladder"):
        apply(tmp_path, BUILDS_ON.replace("builds_on: CUDA graphs", f"builds_on: {base}"))
    assert not Benchmark.objects.filter(slug="h200").exists()


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parents[4] / "benchmarks" / "gpu").glob("*.yaml")))
def test_the_gpu_ladders_in_the_repository_apply(name, tmp_path):
    """The YAML files benchmarks/gpu/ carries to the device machine are valid benchmarks as code:
    a typo in a flag or a variant would otherwise show only there, after minutes of device time."""
    text = (Path(__file__).parents[4] / "benchmarks" / "gpu" / name).read_text()
    before = snapshot()
    out = apply(tmp_path, text, "--dry-run")
    assert "create benchmark" in out.lower() and snapshot() == before
    apply(tmp_path, text)
    assert Benchmark.objects.count() == 1 and Variant.objects.count() >= 1


def test_packages_are_applied_and_a_bad_requirement_is_refused_naming_it(tmp_path):
    good = ("benchmarks:\n  - slug: gguf\n    name: GGUF\n    model: /models/tiny-q8_0.gguf\n"
            "    packages: [\"vllm-gguf-plugin==0.1.0\", \"gguf>=0.17\"]\n    variants:\n      - {name: q8_0, reference: true}\n")
    apply(tmp_path, good)
    assert Benchmark.objects.get(slug="gguf").packages == ["vllm-gguf-plugin==0.1.0", "gguf>=0.17"]
    before = snapshot()
    with pytest.raises(CommandError, match=r"packages: packages\[0\]: 'x @ https://evil/x.whl' is not a requirement"):
        apply(tmp_path, good.replace('"vllm-gguf-plugin==0.1.0"', '"x @ https://evil/x.whl"'))
    assert snapshot() == before
