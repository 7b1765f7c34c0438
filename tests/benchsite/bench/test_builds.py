"""The web side of engine builds: the spec a worker receives carries every patch and the engine
source; what the worker built and where a run failed are stored and shown."""
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchsite.bench.domain import chart_series as history
from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import complete, dispatch, fail, trigger
from benchsite.bench.models import Benchmark, Build, EngineSource, Patch, Run, Variant
from runners.contract import BUILD_PATHS, FAILURE_KINDS, MAX_PATCH_BYTES, BuildInfo, JobSpec

pytestmark = pytest.mark.django_db

SHA = "0123456789abcdef0123456789abcdef01234567"


def diff(tag: str) -> str:
    return f"--- a/vllm/x.py\n+++ b/vllm/x.py\n@@ -1 +1 @@\n-a\n+{tag}\n"


@pytest.fixture
def git_benchmark():
    source = EngineSource.objects.create(name="vllm", kind=EngineSource.Kind.GIT,
                                         repo_url="https://github.com/vllm-project/vllm.git", default_ref="main")
    bench = Benchmark.objects.create(name="B", slug="b", model="m", engine_source=source)
    bench.patches.add(Patch.objects.create(name="bench.patch", content=diff("bench")))
    variant = Variant.objects.create(benchmark=bench, position=1, name="eager", flags=["--enforce-eager"])
    variant.patches.add(Patch.objects.create(name="variant.patch", content=diff("variant")))
    pools.pool_workers_seen(worker="gpu@test-host", pools=[bench.gpu_pool])  # a GPU worker serves its pool
    return bench


def worker_view(run: Run) -> JobSpec:
    """What a GPU worker gets: the JSON message, parsed by the contract."""
    return JobSpec.from_dict(json.loads(json.dumps(dispatch.run_spec(run))))


def test_spec_carries_benchmark_variant_and_run_patches_and_the_ref(git_benchmark):
    uploaded = trigger.patch_create(name="upload.patch", content=diff("run"))
    [run] = trigger.runs_trigger(benchmark=git_benchmark, trigger=Run.Trigger.FORM, ref="v0.32.0", patches=[uploaded])
    spec = worker_view(run)
    assert [(p.name, p.origin) for p in spec.patches] == [
        ("bench.patch", "benchmark"), ("variant.patch", "variant"), ("upload.patch", "run")]
    assert [p.content for p in spec.patches] == [diff("bench"), diff("variant"), diff("run")]
    assert all(p.sha256 == Patch.objects.get(name=p.name).sha256 for p in spec.patches)
    assert (spec.engine.kind, spec.engine.repo, spec.engine.ref) == (
        "git", "https://github.com/vllm-project/vllm.git", "v0.32.0")


def test_spec_of_a_push_carries_its_commit_and_the_default_ref_otherwise(git_benchmark):
    [pushed] = trigger.runs_trigger(benchmark=git_benchmark, trigger=Run.Trigger.WEBHOOK, commit=SHA)
    [plain] = trigger.runs_trigger(benchmark=git_benchmark, trigger=Run.Trigger.FORM)
    assert worker_view(pushed).engine.commit == SHA
    assert (worker_view(plain).engine.ref, worker_view(plain).engine.commit) == ("main", "")


def test_installed_benchmark_runs_the_installed_engine_and_refuses_a_ref(db):
    bench = Benchmark.objects.create(name="I", slug="i", model="m")
    Variant.objects.create(benchmark=bench, position=1, name="v")
    [run] = trigger.runs_trigger(benchmark=bench, trigger=Run.Trigger.FORM)
    assert worker_view(run).engine.kind == "installed"
    with pytest.raises(trigger.TriggerError, match="installed engine"):
        trigger.runs_trigger(benchmark=bench, trigger=Run.Trigger.FORM, ref="main")


def test_bad_ref_is_refused_at_trigger(git_benchmark):
    with pytest.raises(trigger.TriggerError, match="invalid ref"):
        trigger.runs_trigger(benchmark=git_benchmark, trigger=Run.Trigger.FORM, ref="--upload-pack=x")
    assert not Run.objects.exists()


def _running(bench) -> Run:
    [run] = trigger.runs_trigger(benchmark=bench, trigger=Run.Trigger.FORM, ref="main")
    Run.objects.filter(id=run.id).update(state=Run.State.RUNNING)
    return run


def test_completed_run_records_the_build_and_the_resolved_commit(git_benchmark):
    run = _running(git_benchmark)
    build = {"path": "overlay", "repo": "https://github.com/vllm-project/vllm.git", "ref": "main", "commit": SHA,
             "base_commit": "f" * 40, "engine_version": "0.32.0", "duration_s": 2.5, "cache_hit": False,
             "patches": [Patch.objects.get(name="bench.patch").sha256],
             "branch": "main", "parent": "e" * 40, "first_parent_depth": 12}
    result = {"measurements": [{"metric": "decode_tok_s", "value": 50.0, "unit": "tok/s", "direction": "higher"}],
              "artifacts": [{"kind": "build_log", "name": "build.log", "content": "built"}], "build": build}
    assert complete.run_complete(run_id=run.id, result=result)
    run.refresh_from_db()
    assert (run.ref, run.commit) == ("main", SHA)
    assert (run.build.path, run.build.engine_version, run.build.duration_s) == ("overlay", "0.32.0", 2.5)
    assert [p.name for p in run.build.patches.all()] == ["bench.patch"]
    assert (run.branch, run.build.parent_commit, run.build.first_parent_depth) == ("main", "e" * 40, 12)
    assert run.artifacts.get(kind="build_log").read_text() == "built"
    chart = history.benchmark_history(benchmark=git_benchmark, metric="decode_tok_s")
    [point] = chart["variants"][0]["points"]
    assert (chart["axis"][point["x"]]["commit"], point["ref"], point["build"]) == (SHA, "main", "overlay")


def test_failed_build_is_a_patch_failure_on_the_run_page(client, git_benchmark):
    run = _running(git_benchmark)
    fail.run_fail(run_id=run.id, error="building engine: patch 'bench.patch' does not apply",
                      artifacts=[{"kind": "build_log", "name": "build.log", "content": "Hunk #1 FAILED"}],
                      failure_kind="patch", build=BuildInfo.from_dict({"path": "", "ref": "main", "commit": SHA}))
    run.refresh_from_db()
    assert (run.state, run.failure_kind, run.commit) == (Run.State.FAILED, "patch", SHA)
    page = client.get(reverse("bench:run", args=[run.pk])).content.decode()
    assert "Patch failure" in page and SHA in page and "<code>main</code>" in page


def test_model_choices_are_the_contracts():
    assert tuple(Run.FailureKind.values) == FAILURE_KINDS
    assert tuple(Build.Path.values) == BUILD_PATHS
    assert Build.Path.OVERLAY.label == "Python overlay on the installed engine"  # labels too (the migrations have them)


@pytest.fixture
def logged_in(client):
    client.force_login(get_user_model().objects.create_user("u", password="p"))
    return client


def test_trigger_form_stores_ref_and_uploaded_patch(logged_in, git_benchmark, monkeypatch):
    variant = git_benchmark.variants.get()
    upload = SimpleUploadedFile("mine.patch", diff("mine").encode())
    response = logged_in.post(reverse("bench:trigger", args=["b"]),
                              {"variants": [variant.pk], "ref": "perf/x", "patch": upload})
    assert response.status_code == 302
    run = Run.objects.get()
    assert run.ref == "perf/x" and [p.name for p in run.patches.all()] == ["mine.patch"]
    assert worker_view(run).patches[-1].content == diff("mine")


def test_trigger_form_refuses_an_oversize_patch_and_queues_nothing(logged_in, git_benchmark):
    variant = git_benchmark.variants.get()
    big = SimpleUploadedFile("big.patch", diff("x").encode() + b"+" * MAX_PATCH_BYTES)
    response = logged_in.post(reverse("bench:trigger", args=["b"]), {"variants": [variant.pk], "patch": big})
    assert response.status_code == 400
    assert "the limit is 1048576 (1 MiB)" in response.content.decode()
    assert not Run.objects.exists()
