"""No stale field: the run page says what is known at the run's stage (a fingerprint pending, the
commit a failed git run tried, the phase it failed in), and the trigger form shows no label of
a hidden field."""
import pytest

from benchsite.bench.lifecycle import claim, complete, fail, progress
from benchsite.bench.lifecycle.trigger import runs_trigger
from benchsite.bench.models import EngineSource, Run
from runners.contract import BuildInfo

pytestmark = pytest.mark.django_db

SHA = "0123456789abcdef0123456789abcdef01234567"


def _field(page: str, dom_id: str) -> str:
    start = page.index(f'id="{dom_id}"')
    return page[start:page.index("</dd>", start)]


@pytest.fixture
def git_benchmark(ladder_benchmark):
    ladder_benchmark.engine_source = EngineSource.objects.create(
        name="vllm", kind=EngineSource.Kind.GIT, repo_url="https://github.com/vllm-project/vllm.git", default_ref="main")
    ladder_benchmark.save()
    return ladder_benchmark


def _running(benchmark, sent, **trigger):
    [run] = runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API, variants=[benchmark.variants.first()],
                                  **trigger)
    claim.run_claim(run_id=run.id, task_id="t", worker_host="gpu-1")
    return run


def test_the_host_fingerprint_of_a_running_run_is_pending_not_an_older_workers(client, ladder_benchmark, sent):
    run = _running(ladder_benchmark, sent)
    progress.run_progress(run_id=run.id, phase="starting engine", state="RUNNING", task_id="t")
    field = _field(client.get(f"/runs/{run.id}/").content.decode(), "run-host-fingerprint")
    assert "not reported yet" in field and "older worker" not in field

    complete.run_complete(run_id=run.id, task_id="t", result={"measurements": [], "artifacts": []})  # an older worker
    assert "not reported (older worker)" in _field(client.get(f"/runs/{run.id}/").content.decode(),
                                                   "run-host-fingerprint")


def test_a_failed_git_run_shows_the_commit_it_tried_and_the_phase_it_failed_in(client, git_benchmark, sent):
    run = _running(git_benchmark, sent, ref="perf/x")
    progress.run_progress(run_id=run.id, phase="building engine", task_id="t")
    # what the worker sends when the build of a resolved ref fails (runners.job: BuildFailure.commit)
    fail.run_fail(run_id=run.id, error="building engine: commit 0123456789ab changes compiled sources",
                      failure_kind="build", build=BuildInfo.from_dict({"path": "", "ref": "perf/x", "commit": SHA}),
                      task_id="t")
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert SHA in _field(page, "run-commit") and "installed engine" not in page
    assert "building engine" in _field(page, "run-phase") and "(where it failed)" in _field(page, "run-phase")
    assert "storing artifacts" not in page

    # failed before the worker resolved the ref: said so, never "installed engine"
    early = _running(git_benchmark, sent, ref="perf/y")
    fail.run_fail(run_id=early.id, error="building engine: cannot fetch", failure_kind="build",
                      build=BuildInfo.from_dict({"path": "", "ref": "perf/y", "commit": ""}), task_id="t")
    field = _field(client.get(f"/runs/{early.id}/").content.decode(), "run-commit")
    assert "not resolved: the run ended before the worker resolved the ref" in field

    # an older worker reported "storing artifacts" before its failure: not where the run failed
    older = _running(git_benchmark, sent, ref="perf/z")
    progress.run_progress(run_id=older.id, phase="storing artifacts", task_id="t")
    fail.run_fail(run_id=older.id, error="starting engine: exited with code 1", failure_kind="engine", task_id="t")
    field = _field(client.get(f"/runs/{older.id}/").content.decode(), "run-phase")
    assert "storing artifacts" not in field and "where it failed" not in field


def test_a_run_of_the_installed_engine_says_so_from_the_start(client, ladder_benchmark, sent):
    [run] = runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.API,
                                  variants=[ladder_benchmark.variants.first()])
    field = _field(client.get(f"/runs/{run.id}/").content.decode(), "run-commit")
    assert "installed engine" in field and "not resolved" not in field


def test_the_trigger_form_shows_no_label_of_a_hidden_field(auth_client, git_benchmark):
    page = auth_client.get(f"/b/{git_benchmark.slug}/").content.decode()
    form = page[page.index('class="trigger-form"'):page.index("</form>", page.index('class="trigger-form"'))]
    assert 'type="hidden" name="patch_name"' in form and 'type="hidden" name="patch_b64"' in form
    assert "Patch name" not in form and "Patch b64" not in form
    assert 'for="id_patch_name"' not in form and 'for="id_patch_b64"' not in form
    assert '<label for="id_ref">Engine ref</label>' in form  # the visible fields keep their labels
