"""A slow push, found, confirmed once and bisected once, for real on the CPU engine: a repository
of 16 commits (the installed vLLM's Python tree, then 15 commits) where one commit adds 100 ms to
every decode step (the tiny model's step is under 10 ms idle and about 35 ms under the suite's
load: a loaded host cannot hide it). Each run is an overlay build of its commit and a real engine
start (runners.job, as the GPU worker runs it; the test plays the worker in-process). Smallest
settings that still show the slowdown: eager, 16 tokens, one repeat. Pushes to main measure
commits 9, 10 and 11, then one push brings commits 12 and 13 (12 is the slow one): the web side
judges it, makes one confirmation re-run, and one bisection finds the guilty commit (one run:
12, the only commit between the last good and the first bad). Six engine starts."""
import pytest

from benchsite.bench.lifecycle import claim, complete, dispatch, trigger
from benchsite.bench.models import Benchmark, EngineSource, Run
from benchsite.regressions.models import Bisection
from runners.builder.config import BuildConfig
from runners.job import run_job
from tests.benchsite.regressions.conftest import regression_costs
from tests.runners.builder.conftest import BASE_TAG, Remote, installed_vllm

LLAMA = "vllm/model_executor/models/llama.py"
ORIGINAL = """        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits
"""
SLOWER = """        logits = self.logits_processor(self.lm_head, hidden_states)
        import time as _bench_time  # bench bisection test: 100 ms more per decode step
        _bench_time.sleep(0.1)
        return logits
"""
GUILTY = 12  # of commits 1..15 after the base


@pytest.fixture
def sixteen_commits(tmp_path):
    (tmp_path / "remote").mkdir()
    remote = Remote(tmp_path / "remote")
    src = installed_vllm()
    files = {f"vllm/{py.relative_to(src)}": py.read_text() for py in src.rglob("*.py")}
    commits = [remote.commit({**files, "README.md": "vLLM Python tree\n"}, "base")]
    remote.tag(BASE_TAG)
    llama = files[LLAMA]
    assert llama.count(ORIGINAL) == 1
    for i in range(1, 16):
        change = {"vllm/bench_step.py": f"STEP = {i}\n"}
        if i == GUILTY:
            change[LLAMA] = llama.replace(ORIGINAL, SLOWER)
        commits.append(remote.commit(change, f"step {i}"))
    return remote, commits


@pytest.mark.engine
@pytest.mark.alone  # its judgement compares speeds measured minutes apart: `make test` runs it by itself
@pytest.mark.timeout(900)
def test_bisected_to_the_slow_commit_on_the_cpu_engine(db, sixteen_commits, tiny_model_dir, tmp_path, monkeypatch,
                                                        settings, django_capture_on_commit_callbacks):
    from benchsite.celery import app

    remote, commits = sixteen_commits
    settings.BENCH_ALLOW_FILE_REPOS = True
    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setattr(app, "send_task", lambda *a, **k: type("R", (), {"id": "t"})())  # played below
    source = EngineSource.objects.create(name="vllm", kind=EngineSource.Kind.GIT, repo_url=remote.url, default_ref="main")
    bench = Benchmark.objects.create(
        name="tiny", slug="tiny", model=str(tiny_model_dir), engine_source=source, max_tokens=16, repeats=1, warmup=1,
        engine_args=["--enforce-eager", "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "2"],
        startup_timeout_s=300)
    trigger.variant_create(benchmark=bench, name="eager", is_reference=True)
    build_config = BuildConfig(cache_dir=tmp_path / "cache", base_ref=BASE_TAG, allow_file_urls=True)

    def work_the_queue():
        while (run := Run.objects.filter(state=Run.State.QUEUED).order_by("priority", "id").first()) is not None:
            spec = dispatch.run_spec(run)
            spec["probes"] = ["decode"]
            result = run_job(spec, work_dir=tmp_path / f"work-{run.id}", build_config=build_config)
            assert claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
            with django_capture_on_commit_callbacks(execute=True):
                complete.run_complete(run_id=run.id, result=result)

    for commit in (commits[9], commits[10], commits[11], commits[13]):  # what the webhook queues per push
        with django_capture_on_commit_callbacks(execute=True):
            trigger.runs_trigger(benchmark=bench, trigger=Run.Trigger.WEBHOOK, commit=commit, ref="main",
                                  branch="main")
        work_the_queue()
    costs = regression_costs(commits[13])
    assert costs["confirmation_runs"] == {"eager": 1}, costs  # one re-run, whatever the metrics it moved
    assert costs["bisections"] == 1, costs
    bisection = Bisection.objects.get(bad_commit=commits[13])
    bisection.refresh_from_db()
    probes = bisection.steps.filter(role="probe")
    steps = list(bisection.steps.values_list("role", "commit", "outcome", "value", "note"))
    assert bisection.state == "found", (bisection.message, steps)
    assert bisection.first_bad == commits[GUILTY], (commits.index(bisection.first_bad), steps)
    assert 1 <= probes.count() <= 3
    # the slowdown is plain at these settings, on the metric that moved most (tok/s down or ms up)
    assert max(bisection.bad_level, bisection.good_level) > 1.25 * min(bisection.bad_level, bisection.good_level)
