"""The job spec a run is sent is the one it was triggered with: kept (one row per distinct
content), sent again unchanged by the reaper, a lost message's resend and a held run's release,
and shown by its page and spec.json, whatever the benchmark became since (bench_apply)."""
import json
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import ProtectedError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchsite.bench.definitions.apply import config_apply
from benchsite.bench.lifecycle import claim, complete, dispatch, jobspec, reap, requeue
from benchsite.bench.lifecycle.trigger import TriggerError, patch_create, runs_trigger
from benchsite.bench.models import Benchmark, EngineSource, KeptSpec, Patch, Run
from benchsite.bench.pages.runpage import REBUILT_NOTE
from benchsite.bench.worker import broker
from runners.contract import JobSpec

pytestmark = pytest.mark.django_db
REPO = "https://github.com/acme/vllm.git"
SHA_A, SHA_B = "a" * 40, "b" * 40


def _apply(model: str, *, engine_args=(), workloads=None, flags=("--enforce-eager",)) -> Benchmark:
    spec = {"slug": "tiny", "name": "tiny", "model": model, "gpu_pool": "cpu", "engine": {"repo": REPO},
            "engine_args": list(engine_args), "variants": [{"name": "eager", "flags": list(flags)}, {"name": "graphs"}]}
    if workloads is not None:
        spec["workloads"] = workloads
    config_apply(data={"benchmarks": [spec]})
    return Benchmark.objects.get(slug="tiny")


def _executed(sent) -> list[dict]:
    """The specs sent to the GPU queues, in order."""
    return [args[1] for name, args, _ in sent if name == "bench.execute_run"]


def _trigger(benchmark, capture, variant="eager", **kwargs) -> Run:
    with capture(execute=True):
        (run,) = runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API, variants=[benchmark.variants.get(name=variant)],
                              **kwargs)
    return run


def _spec_json(client, run) -> tuple[dict, str]:
    response = client.get(f"/runs/{run.pk}/spec.json")
    assert response.status_code == 200
    return json.loads(response.content), response["X-Job-Spec"]


def test_a_reapplied_benchmark_changes_neither_an_older_runs_spec_nor_what_it_is_sent_again(
        client, sent, settings, monkeypatch, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    benchmark = _apply("/models/llama-8b", engine_args=["--max-model-len", "1024"])
    run = _trigger(benchmark, capture, ref="main")
    (first,) = _executed(sent)
    assert (first["model"], first["engine_args"], first["run_id"]) == (
        "/models/llama-8b", ["--max-model-len", "1024", "--enforce-eager"], run.pk)
    assert first["engine"] == {"kind": "git", "repo": REPO, "ref": "main", "commit": "", "merge_base_with": ""}

    # bench_apply: another model, engine arguments, workloads and variant flags
    benchmark = _apply("/models/qwen-32b", engine_args=["--max-model-len", "4096"], flags=["--max-num-seqs", "8"],
                       workloads=[{"concurrency": 4, "max_tokens": 64}])
    spec, header = _spec_json(client, run)
    assert spec == first and header == "as sent"
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "<code>/models/llama-8b</code>" in html and "qwen" not in html and REBUILT_NOTE not in html
    assert client.get(f"/api/runs/{run.pk}/").json()["spec"] == {"url": f"/runs/{run.pk}/spec.json", "as_sent": True,
                                                                "settings": run.kept_spec.settings}

    # the reaper re-queues it (its worker was lost): the same spec goes again
    settings.BENCH_REAPER_REQUEUE, settings.BENCH_HEARTBEAT_TIMEOUT_S = True, 60
    run.refresh_from_db()
    assert claim.run_claim(run_id=run.id, task_id=run.task_id, worker_host="gpu-a")
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(seconds=120))
    with capture(execute=True):
        assert reap.runs_reap_stale() == 1
    assert _executed(sent) == [first, first]

    # its message lost with the broker: sent again, the same spec
    monkeypatch.setattr(broker, "live_task_ids", lambda url, queues: set())
    Run.objects.filter(id=run.id).update(sent_at=timezone.now() - timedelta(seconds=settings.BENCH_REQUEUE_LOST_AFTER_S + 60))
    assert requeue.runs_requeue_lost() == 1
    assert _executed(sent) == [first, first, first]

    # a fresh trigger gets the benchmark as it is now
    fresh = _trigger(benchmark, capture, ref="main")
    now = _executed(sent)[-1]
    assert (now["run_id"], now["model"], now["engine_args"]) == (
        fresh.pk, "/models/qwen-32b", ["--max-model-len", "4096", "--max-num-seqs", "8"])
    assert [w["concurrency"] for w in now["workloads"]] == [4]
    assert _spec_json(client, fresh)[0] == now
    compared = client.get(f"/compare/?a={run.pk}&b={fresh.pk}").content.decode()  # what each one ran with
    assert "/models/llama-8b" in compared and "/models/qwen-32b" in compared
    fresh.refresh_from_db()  # other settings: another series, which the compare page shows
    assert run.kept_spec.settings != fresh.kept_spec.settings
    assert run.kept_spec.settings[:12] in compared and fresh.kept_spec.settings[:12] in compared

    # the worker resolves `main` to a commit: the run's commit changes, the spec it was sent does not
    run.refresh_from_db()
    assert claim.run_claim(run_id=run.id, task_id=run.task_id, worker_host="gpu-b")
    assert complete.run_complete(run_id=run.id, result={"measurements": [], "build": {"commit": SHA_A, "ref": "main"}})
    run.refresh_from_db()
    assert run.commit == SHA_A and _spec_json(client, run)[0] == first


def test_a_held_run_is_sent_what_was_triggered_though_the_benchmark_changed_while_it_waited(
        sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    benchmark = _apply("/models/old")
    push = _trigger(benchmark, capture, commit=SHA_A)
    confirmation = _trigger(benchmark, capture, commit=SHA_A, priority=Run.Priority.CONFIRM)  # held behind the push
    assert [s["run_id"] for s in _executed(sent)] == [push.pk]
    _apply("/models/new")
    assert claim.run_claim(run_id=push.id, task_id="task-1", worker_host="gpu-a")
    with capture(execute=True):
        complete.run_complete(run_id=push.id, result={"measurements": []})  # the pool is free: released
    released = _executed(sent)[-1]
    assert (released["run_id"], released["model"], released["engine"]["commit"]) == (confirmation.pk, "/models/old", SHA_A)


def test_runs_of_one_variant_share_one_kept_row_and_keep_their_own_values(sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    benchmark = _apply("/models/m")
    first = _trigger(benchmark, capture, commit=SHA_A, ref="main")
    second = _trigger(benchmark, capture, commit=SHA_B, ref="main")
    other_variant = _trigger(benchmark, capture, variant="graphs", commit=SHA_A, ref="main")
    base = _trigger(benchmark, capture, ref=SHA_B, merge_base_with="main")
    assert first.kept_spec_id == second.kept_spec_id != other_variant.kept_spec_id
    assert KeptSpec.objects.count() == 3  # eager at a commit, graphs at a commit, eager at a merge base
    a, b, c, d = _executed(sent)
    assert (a["run_id"], a["engine"]["commit"], b["run_id"], b["engine"]["commit"]) == (first.pk, SHA_A, second.pk, SHA_B)
    assert d["engine"] == {"kind": "git", "repo": REPO, "ref": SHA_B, "commit": "", "merge_base_with": "main"}
    assert KeptSpec.objects.get(id=first.kept_spec_id).spec["engine"] == {
        "kind": "git", "repo": REPO, "ref": None, "commit": None, "merge_base_with": ""}  # null: the run's own
    for run, spec in zip((first, second, other_variant, base), (a, b, c, d)):
        run.refresh_from_db()
        assert dispatch.run_spec(run) == spec == jobspec.spec_rebuilt(run)  # nothing changed meanwhile
        assert JobSpec.from_dict(json.loads(json.dumps(spec))).to_dict() == spec  # the contract's round trip


def test_the_installed_engine_and_a_default_ref_are_kept_as_sent(sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    installed = Benchmark.objects.create(name="inst", slug="inst", model="/models/m", repeats=3)
    installed.variants.create(position=1, name="eager")
    run = _trigger(installed, capture, variant="eager", repeats=7)
    (spec,) = _executed(sent)
    assert spec["engine"]["kind"] == "installed" and spec["repeats"] == 7
    git = Benchmark.objects.create(name="git", slug="git", model="/models/m", engine_source=EngineSource.objects.create(
        name="src", kind=EngineSource.Kind.GIT, repo_url=REPO, default_ref="main"))
    git.variants.create(position=1, name="eager")
    default = _trigger(git, capture)
    EngineSource.objects.filter(name="src").update(default_ref="release", repo_url="https://github.com/other/vllm.git")
    default.refresh_from_db()
    assert jobspec.spec_sent(default)["engine"] == {"kind": "git", "repo": REPO, "ref": "main", "commit": "",
                                                    "merge_base_with": ""}
    assert jobspec.spec_rebuilt(default)["engine"]["ref"] == "release"  # what a rebuild would have shown
    run.refresh_from_db()
    assert jobspec.spec_sent(run) == spec


def test_the_benchmarks_and_variants_patches_are_kept_with_their_content_the_runs_own_follow(
        sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    benchmark = _apply("/models/m")
    eager = benchmark.variants.get(name="eager")
    shared = Patch.objects.create(name="shared.diff", content="--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n")
    step = Patch.objects.create(name="step.diff", content="--- a\n+++ b\n@@ -1 +1 @@\n-p\n+q\n")
    benchmark.patches.set([shared])
    eager.patches.set([step])
    upload = patch_create(name="mine.diff", content="--- a\n+++ b\n@@ -1 +1 @@\n-m\n+n\n")
    run = _trigger(benchmark, capture, ref="main", patches=[upload])
    (spec,) = _executed(sent)
    assert [(p["name"], p["origin"]) for p in spec["patches"]] == [
        ("shared.diff", "benchmark"), ("step.diff", "variant"), ("mine.diff", "run")]
    assert [p["name"] for p in KeptSpec.objects.get().spec["patches"]] == ["shared.diff", "step.diff"]
    # the ladder's patches edited and taken off after the trigger (the admin): the run keeps its own
    Patch.objects.filter(id=step.id).update(content="--- a\n+++ b\n@@ -1 +1 @@\n-p\n+r\n")
    eager.patches.clear()
    benchmark.patches.clear()
    run.refresh_from_db()
    assert jobspec.spec_sent(run) == spec
    assert [p["name"] for p in jobspec.spec_rebuilt(run)["patches"]] == ["mine.diff"]


def test_a_trigger_that_makes_no_valid_job_is_refused_before_any_run_is_stored(sent):
    source = EngineSource.objects.create(name="src", kind=EngineSource.Kind.GIT, repo_url=REPO)  # no default ref
    benchmark = Benchmark.objects.create(name="b", slug="b", model="/models/m", engine_source=source)
    benchmark.variants.create(position=1, name="eager")
    with pytest.raises(TriggerError, match="needs a ref or a commit"):
        runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    big = patch_create(name="big.diff", content="+" * (1024 * 1024 + 1))
    with pytest.raises(TriggerError, match="big.diff"):
        runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API, ref="main", patches=[big])
    assert not Run.objects.exists() and not KeptSpec.objects.exists()


def _old_run(benchmark) -> Run:
    """A run stored before specs were kept: no KeptSpec row."""
    return Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(name="eager"), batch=uuid.uuid4(),
                              ref="main")


def test_a_run_from_before_specs_were_kept_shows_a_rebuilt_spec_and_says_so_then_keeps_its_first_send(
        client, sent):
    benchmark = _apply("/models/old")
    run = _old_run(benchmark)
    _apply("/models/new")
    spec, header = _spec_json(client, run)
    assert spec["model"] == "/models/new" and header == REBUILT_NOTE
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="reproduce-rebuilt"' in html and REBUILT_NOTE in html
    assert client.get(f"/api/runs/{run.pk}/").json()["spec"]["as_sent"] is False
    assert client.get(f"/api/runs/{run.pk}/").json()["spec"]["settings"] is None

    dispatch.enqueue_run(run.id)  # sent now: kept as sent, and sent so again
    run.refresh_from_db()
    assert run.kept_spec_id is not None and _executed(sent) == [spec]
    _apply("/models/newer")
    assert _spec_json(client, run) == (spec, "as sent")
    Run.objects.filter(id=run.id).update(task_id="")
    dispatch.enqueue_run(run.id)
    assert _executed(sent) == [spec, spec]


def test_the_run_page_reads_no_more_queries_for_a_kept_spec_than_for_a_rebuilt_one(
        client, sent, django_capture_on_commit_callbacks):
    benchmark = _apply("/models/m")
    kept = _trigger(benchmark, django_capture_on_commit_callbacks, ref="main")
    old = _old_run(benchmark)
    counts = {}
    for name, run in (("kept", kept), ("rebuilt", old)):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/runs/{run.pk}/").status_code == 200
        counts[name] = len(ctx)
    assert counts["kept"] <= counts["rebuilt"], counts


def test_a_kept_spec_a_run_points_at_cannot_be_deleted(sent, django_capture_on_commit_callbacks):
    benchmark = _apply("/models/m")
    run = _trigger(benchmark, django_capture_on_commit_callbacks, ref="main")
    with pytest.raises(ProtectedError):
        KeptSpec.objects.filter(id=run.kept_spec_id).delete()


def test_the_web_side_validates_a_job_once_when_it_is_triggered_not_when_it_sends_or_shows_it(
        client, sent, monkeypatch, django_capture_on_commit_callbacks):
    benchmark = _apply("/models/m")
    validated = []
    read = JobSpec.from_dict.__func__
    monkeypatch.setattr(JobSpec, "from_dict", classmethod(lambda cls, data: validated.append(1) or read(cls, data)))
    run = _trigger(benchmark, django_capture_on_commit_callbacks, ref="main")  # triggered and sent
    assert len(validated) == 1 and len(_executed(sent)) == 1
    _spec_json(client, run)
    assert client.get(f"/runs/{run.pk}/").status_code == 200
    Run.objects.filter(id=run.id).update(task_id="")
    dispatch.enqueue_run(run.id)  # sent again
    assert len(validated) == 1 and len(_executed(sent)) == 2
