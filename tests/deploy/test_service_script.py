"""benchmarks/gpu/service_on_gpu.sh on CPU: the whole service as the script starts it on a GPU host
(Redis, gunicorn, the web-queue and GPU Celery workers, SQLite), a benchmark that builds vLLM from
a git repository, triggered at a branch and at a full SHA through the JSON API. Only the engine
is the fake one (tests/faults/fake_engine.py): the builds, the API and the workers are real."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.faults.harness import FAKE_ENGINE, free_port
from tests.runners.builder.conftest import BASE_TAG, fresh_main, vllm_remote  # noqa: F401 (fixtures)

SCRIPT = ROOT / "benchmarks" / "gpu" / "service_on_gpu.sh"

YAML = """benchmarks:
  - slug: svc-git
    name: the service script at a ref
    model: var/tiny-model
    gpu_pool: cpu-svc-script
    max_tokens: 8
    repeats: 1
    warmup: 1
    engine: {{repo: "{repo}"}}
    variants:
      - {{name: eager, flags: ["--enforce-eager"], reference: true}}
"""


@pytest.mark.timeout(600)
def test_the_gpu_service_script_triggers_a_git_engine_benchmark_at_a_ref(fresh_main, tiny_model_dir, tmp_path):
    assert shutil.which("redis-server"), "redis-server is needed (apt-get install redis-server)"
    sha = fresh_main.commit({"vllm/_svc_marker.py": "# a Python-only change\n"}, "svc marker", branch="perf/svc")
    (tmp_path / "bench.yaml").write_text(YAML.format(repo=fresh_main.url))
    svc = tmp_path / "svc"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "DATABASE_URL", "BENCH_", "SVC_"))},
           "SVC_DIR": str(svc), "SVC_PYTHON": sys.executable, "SVC_SITE": "", "OUT": str(tmp_path / "out"),
           "SVC_REDIS_SERVER": shutil.which("redis-server"), "SVC_REDIS_PORT": str(free_port()),
           "SVC_WEB_PORT": str(free_port()), "SVC_YAML": str(tmp_path / "bench.yaml"), "SVC_MODEL": str(tiny_model_dir),
           "SVC_VLLM_COMMAND": f"{sys.executable} {FAKE_ENGINE}", "BENCH_ENGINE_CPU": "0",
           "BENCH_ALLOW_FILE_REPOS": "1", "BENCH_VLLM_BASE_REF": BASE_TAG}

    def script(*args, check=True):
        done = subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=400)
        logs = "".join(f"\n--- {p.name}\n{p.read_text()[-3000:]}" for p in (svc / "var" / "logs").glob("*.log"))
        assert not check or done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}{logs}"
        return done

    def runs():
        return json.loads((tmp_path / "out" / "runs.json").read_text())["runs"]

    try:
        refused = script("start", check=False)  # services up; a git engine's benchmark needs a ref
        assert refused.returncode != 0
        assert f"benchmark svc-git builds vLLM from {fresh_main.url}: give the ref to run" in refused.stderr
        assert "give commit (a full SHA) or ref" not in refused.stdout + refused.stderr

        assert "at perf/svc" in script("trigger", "perf/svc").stdout
        script("wait", "240")
        [run] = runs()
        assert (run["state"], run["ref"], run["commit"]) == ("SUCCEEDED", "perf/svc", sha), run
        assert run["build"]["path"] == "overlay"

        script("trigger", sha)  # a full SHA: that commit, as a push would run it
        script("wait", "240")
        [run] = runs()
        assert (run["state"], run["commit"]) == ("SUCCEEDED", sha), run
    finally:
        script("stop", check=False)


TWO_FILES = ("""benchmarks:
  - slug: svc-ladder
    name: a ladder of three
    model: var/tiny-model
    gpu_pool: cpu-svc-variants
    max_tokens: 8
    repeats: 1
    warmup: 1
    variants:
      - {name: eager, flags: ["--enforce-eager"], reference: true}
      - {name: cuda graphs}
      - {name: cuda graphs + unfused grouped top-k, env: {VLLM_USE_FUSED_MOE_GROUPED_TOPK: "0"}}
""", """benchmarks:
  - slug: svc-single
    name: one variant
    model: var/tiny-model
    gpu_pool: cpu-svc-variants
    max_tokens: 8
    repeats: 1
    warmup: 1
    variants:
      - {name: eager, flags: ["--enforce-eager"], reference: true}
""")


@pytest.mark.timeout(300)
def test_svc_variants_picks_variants_per_benchmark_in_one_service_start(tiny_model_dir, tmp_path):
    """Several benchmark files in one start: `SLUG:NAME` picks a variant of that benchmark only, a
    plain name applies where the benchmark has it, a benchmark no entry applies to runs its whole
    ladder, and a `SLUG:NAME` the benchmark lacks refuses the trigger with the names it has."""
    assert shutil.which("redis-server"), "redis-server is needed (apt-get install redis-server)"
    paths = []
    for i, text in enumerate(TWO_FILES):
        paths.append(tmp_path / f"bench-{i}.yaml")
        paths[-1].write_text(text)
    svc = tmp_path / "svc"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "DATABASE_URL", "BENCH_", "SVC_"))},
           "SVC_DIR": str(svc), "SVC_PYTHON": sys.executable, "SVC_SITE": "", "OUT": str(tmp_path / "out"),
           "SVC_REDIS_SERVER": shutil.which("redis-server"), "SVC_REDIS_PORT": str(free_port()),
           "SVC_WEB_PORT": str(free_port()), "SVC_YAML": " ".join(map(str, paths)), "SVC_MODEL": str(tiny_model_dir),
           "SVC_VLLM_COMMAND": f"{sys.executable} {FAKE_ENGINE}", "BENCH_ENGINE_CPU": "0"}

    def script(*args, check=True, **extra):
        done = subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env={**env, **extra}, capture_output=True,
                              text=True, timeout=200)
        assert not check or done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    script("prepare")
    both = "svc-ladder:eager,svc-ladder:cuda graphs"
    shown = script("variants", SVC_VARIANTS=both)
    assert shown.stdout.splitlines() == ['0 svc-ladder ["eager", "cuda graphs"]', "1 svc-single []"]
    assert "no entry applies to svc-single: its whole ladder (eager)" in shown.stderr
    plain = script("variants", SVC_VARIANTS="cuda graphs")
    assert plain.stdout.splitlines() == ['0 svc-ladder ["cuda graphs"]', "1 svc-single []"]
    assert "benchmark svc-single has no variant 'cuda graphs': left out of its batch" in plain.stderr
    try:
        refused = script("start", check=False, SVC_VARIANTS="svc-single:cuda graphs")
        assert refused.returncode != 0
        assert "SVC_VARIANTS: benchmark svc-single has no variant 'cuda graphs' (it has: eager)" in refused.stderr
        assert "triggering" not in refused.stdout  # nothing of either file was triggered
        started = script("start", SVC_VARIANTS=both)  # the services are kept; one new batch of both files
        assert "triggering svc-single through the JSON API (variants: all)" in started.stdout
        runs = json.loads((svc / "trigger.json").read_text())["runs"]
        assert [r["variant"] for r in runs] == ["eager", "cuda graphs", "eager"], runs
    finally:
        script("stop", check=False)
