"""History per branch on a real git repository: signed pushes to main and to a feature branch go
through the webhook of the running app; the test plays the GPU worker with git's own answers
(the worker's Mirror.lineage on a mirror of the repository) and the speed each commit's file
says; verdicts, change points, the confirmation and the bisection run as in production.

The chart draws main's commits only, in first-parent order (a redelivered push does not reorder
them); the branch's run is apart, at the commit it branched from, and makes no change point; a
change point names the commit's parent in git, while its bisection starts at the last measured
commit."""
import json
import os
import subprocess
import uuid

import httpx
import pytest

from benchsite.bench.domain import chart_series as history
from benchsite.bench.pages import home, selectors
from benchsite.bench.lifecycle import claim, complete, dispatch
from benchsite.bench.lifecycle.trigger import runs_trigger, variant_create
from benchsite.bench.domain.branches import first_parent_order
from benchsite.bench.models import Benchmark, EngineSource, Run
from benchsite.integrations.models import RepoWatch
from benchsite.regressions.models import Bisection, ChangePoint
from runners import contract
from runners.builder.git import Git, Mirror

from tests.benchsite.integrations.conftest import SECRET, SECRET_ENV, sign

pytestmark = pytest.mark.django_db(transaction=True)

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


class Repo:
    """A work tree whose commits each set the decode speed the played worker reports."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        git(path, "init", "--quiet", "--initial-branch=main")
        self.url = f"file://{path}"

    def commit(self, speed: float, message: str) -> str:
        (self.path / "speed.txt").write_text(f"{speed}\n")
        git(self.path, "add", "speed.txt")
        git(self.path, "commit", "--quiet", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def speed(self, sha: str) -> float:
        return float(git(self.path, "show", f"{sha}:speed.txt"))


@pytest.fixture
def setup(db, tmp_path, monkeypatch, settings, sent):
    settings.BENCH_ALLOW_FILE_REPOS = True
    monkeypatch.setenv(SECRET_ENV, SECRET)
    settings.VAR_DIR = tmp_path / "var"  # the web side's bisection mirrors
    repo = Repo(tmp_path / "engine")
    source = EngineSource.objects.create(name="engine", kind=EngineSource.Kind.GIT, repo_url=repo.url,
                                         default_ref="main")
    bench = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", engine_source=source)
    variant_create(benchmark=bench, name="eager", flags=["--enforce-eager"], is_reference=True)
    watch = RepoWatch.objects.create(repo_url=repo.url, branches=["main", "perf/*"], secret_env=SECRET_ENV)
    watch.benchmarks.set([bench])
    mirror = Mirror(repo.url, tmp_path / "worker-cache", Git(allow_file=True, timeout_s=60, log=[]))
    return repo, bench, mirror


def push(live_server, repo: Repo, branch: str, sha: str) -> None:
    payload = {"ref": f"refs/heads/{branch}", "before": "0" * 40, "after": sha, "created": False, "deleted": False,
               "repository": {"clone_url": repo.url, "html_url": repo.url}, "head_commit": {"id": sha}}
    body = json.dumps(payload).encode()
    answer = httpx.post(f"{live_server.url}/webhooks/github/", content=body, timeout=30, headers={
        "Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body)})
    assert answer.status_code == 202, answer.text


def play_worker(repo: Repo, mirror: Mirror, wrong=()) -> list[Run]:
    """Finish every queued run as a GPU worker would: resolve what the spec asks for in its
    mirror, report the commit's lineage and the speed the commit's file says (a commit in WRONG
    gives an incorrect output)."""
    played = []
    while (run := Run.objects.filter(state=Run.State.QUEUED).order_by("id").first()) is not None:
        engine = dispatch.run_spec(run)["engine"]
        if not mirror.ensure():
            mirror.fetch()
        commit = engine["commit"] or mirror.resolve(engine["ref"])
        assert claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
        speed = repo.speed(commit)
        build = {"path": "installed", "repo": repo.url, "ref": engine["ref"], "commit": commit,
                 **mirror.lineage(commit, engine["ref"])}
        result = {"build": build, "measurements": [
            contract.measurement(contract.DECODE_TOK_S, speed, samples=[speed] * 3),
            contract.measurement(contract.CORRECT, 0.0 if commit in wrong else 1.0)]}
        assert complete.run_complete(run_id=run.id, result=result)
        played.append(Run.objects.get(id=run.id))
    return played


def test_main_line_in_first_parent_order_branch_apart_change_point_names_the_parent(setup, live_server, client):
    repo, bench, mirror = setup
    c = [repo.commit(speed, f"c{i}") for i, speed in enumerate([100.0, 101.0, 99.0, 100.0])]
    for sha in c:
        push(live_server, repo, "main", sha)
        play_worker(repo, mirror)

    # perf/x branches off c[2] and is 50% slower: measured, judged against main, shown apart
    git(repo.path, "checkout", "--quiet", "-b", "perf/x", c[2])
    feature = repo.commit(50.0, "perf/x: slower")
    git(repo.path, "checkout", "--quiet", "main")
    push(live_server, repo, "perf/x", feature)
    [feature_run] = play_worker(repo, mirror)
    [home_row] = home.home_benchmarks()[0]["variants"]  # the variant's figure is main's, not the branch's
    latest = home_row["latest"]
    assert (latest["run__commit"], latest["value"], home_row["change"]) == (c[3], 100.0, pytest.approx(1 / 99))
    [step] = selectors.benchmark_ladder(benchmark=bench)  # the ladder's figure too
    assert step.latest_decode_tok_s == 100.0

    # main goes on; c5's push is delivered before c4's (a redelivery): created order is not history
    c += [repo.commit(102.0, "c4"), repo.commit(98.0, "c5")]
    push(live_server, repo, "main", c[5])
    play_worker(repo, mirror)
    push(live_server, repo, "main", c[4])
    play_worker(repo, mirror)

    # one push of two commits: c6 (never measured), then c7, 50% slower
    c += [repo.commit(100.0, "c6"), repo.commit(50.0, "c7")]
    push(live_server, repo, "main", c[7])
    played = play_worker(repo, mirror)  # c7, its confirmation, then the bisection's runs

    assert feature_run.branch == "perf/x"
    assert feature_run.verdicts.get(metric=contract.DECODE_TOK_S).kind == "regression"  # against main's history
    assert set(Run.objects.exclude(id=feature_run.id).exclude(bisect_steps__isnull=False)
               .values_list("branch", flat=True)) == {"main"}  # pushes and the confirmation run

    chart = history.benchmark_history(benchmark=bench, metric=contract.DECODE_TOK_S)
    assert chart["main_line"] == "main"
    axis = [chart["axis"][x]["commit"] for x in sorted(chart["axis"])]
    assert axis == [c[0], c[1], c[2], c[3], c[4], c[5], c[7]]  # main's first-parent order, c6 never ran
    [line] = chart["variants"]
    line_runs = {p["run"] for p in line["points"]}
    assert feature_run.id not in line_runs
    assert {chart["axis"][p["x"]]["commit"] for p in line["points"]} <= set(c)
    [apart] = [p for p in line["off_line"] if p["run"] == feature_run.id]
    assert (apart["commit"], apart["branch"], chart["axis"][apart["x"]]["commit"]) == (feature, "perf/x", c[2])

    assert not ChangePoint.objects.filter(run=feature_run).exists()
    [cp] = ChangePoint.objects.filter(metric=contract.DECODE_TOK_S)
    assert (cp.commit, cp.previous_commit) == (c[7], c[6])  # the real parent, not the previous point
    assert cp.previous_run.commit == c[5]  # the last measured commit before it: c5 (first-parent order)
    assert cp.status == ChangePoint.Status.CONFIRMED and cp.confirm_run.branch == "main"
    bisection = Bisection.objects.get(change_point=cp)
    assert (bisection.commits, bisection.first_bad) == ([c[6], c[7]], c[7])
    assert len(played) <= 4

    page = client.get("/b/tiny/changes/").content.decode()
    assert f"<code>{c[6][:10]}</code> → " in page and f"last measured before: <code>{c[5][:10]}</code>" in page
    page = client.get(f"/runs/{feature_run.id}/").content.decode()
    assert "<code>perf/x</code>" in page and "off the main line" in page
    api = client.get(f"/api/runs/?commit={feature}").json()["runs"]
    assert [r["branch"] for r in api] == ["perf/x"]


def test_a_ref_belongs_to_its_branch_when_the_worker_can_tell(setup, live_server):
    """Runs from the form or the API at a ref: a branch ref's branch (the worker resolves it),
    a commit's or a tag's none; only main's runs draw the line. A wrong output off the line is
    judged incorrect but makes no change point on it."""
    repo, bench, mirror = setup
    base = repo.commit(100.0, "base")
    git(repo.path, "tag", "v1")
    git(repo.path, "checkout", "--quiet", "-b", "perf/y")
    tip = repo.commit(90.0, "perf/y")
    git(repo.path, "checkout", "--quiet", "main")
    asked = {"main": Run.Trigger.FORM, "perf/y": Run.Trigger.API, base: Run.Trigger.API, "v1": Run.Trigger.FORM}
    for ref, trigger in asked.items():
        runs_trigger(benchmark=bench, trigger=trigger, ref=ref)
    [default] = runs_trigger(benchmark=bench, trigger=Run.Trigger.FORM)  # the default ref
    assert default.branch == ""  # not known until the worker resolves it
    played = {run.ref: run for run in play_worker(repo, mirror, wrong={tip})}
    assert {ref: (run.commit, run.branch) for ref, run in played.items()} == {
        "main": (base, "main"), "perf/y": (tip, "perf/y"), base: (base, ""), "v1": (base, ""), "": (base, "main")}
    chart = history.benchmark_history(benchmark=bench, metric=contract.DECODE_TOK_S)
    [line] = chart["variants"]
    assert {p["run"] for p in line["points"]} == {played["main"].id, played[""].id}
    assert sorted((p["branch"], p["commit"], p["incorrect"]) for p in line["off_line"]) == [
        ("", base, False), ("", base, False), ("perf/y", tip, True)]
    assert played["perf/y"].verdicts.get(metric=contract.CORRECT).kind == "regression"
    assert not ChangePoint.objects.exists()


def test_first_parent_order_keeps_runs_without_a_depth_where_they_ran():
    """Runs recorded before workers reported depths stay where they ran; the others take their
    places in first-parent order."""
    commits = ["old-1", "d5", "old-2", "d3", "d4"]
    depths = {"d5": 5, "d3": 3, "d4": 4}
    assert first_parent_order(commits, depths) == ["old-1", "d3", "old-2", "d4", "d5"]
