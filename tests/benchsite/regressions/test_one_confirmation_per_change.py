"""What one slow push costs, through the service: signed pushes to the running app (live server),
the real Redis broker, the regressions pipeline on every finished run. The test plays the one GPU
worker of the pool: it takes the messages from the pool's Redis queue in the broker's order and
reports the speed the pushed commit's own file says (a commit from c11 on is 10x slower: every
tok/s and ITL figure moves tenfold, in both variants of the batch).

It costs at most one confirmation run per variant (every metric judged by it, against the
history before the slow run) and one bisection for the commit range; pushes made while those
wait are run first."""
import base64
import json
import uuid

import httpx
import pytest
import redis

from benchsite.bench.lifecycle import claim, complete, trigger
from benchsite.bench.models import Benchmark, EngineSource, Run
from benchsite.integrations.models import RepoWatch
from benchsite.regressions.models import Bisection, BisectStep, ChangePoint
from benchsite.regressions.selectors import confirmation_due
from runners import contract

from tests.benchsite.integrations.conftest import SECRET, SECRET_ENV, sign
from .conftest import SLOW_FROM, git, regression_costs

pytestmark = pytest.mark.django_db(transaction=True)
WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0, 0.4]
QUEUE = "gpu.cpu"
SPEED_METRICS = (contract.DECODE_TOK_S, contract.ITL_MS_P50, contract.ITL_MS_P90, contract.ITL_MS_P99)


@pytest.fixture
def watched(repo, monkeypatch, live_server, redis_broker):
    """The repository watched on main, running one benchmark of two variants on pool cpu."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    source = EngineSource.objects.create(name="engine", kind=EngineSource.Kind.GIT, repo_url=repo["url"],
                                         default_ref="main")
    bench = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", engine_source=source)
    trigger.variant_create(benchmark=bench, name="eager", flags=["--enforce-eager"], is_reference=True)
    trigger.variant_create(benchmark=bench, name="compiled")
    watch = RepoWatch.objects.create(repo_url=repo["url"], branches=["main"], secret_env=SECRET_ENV)
    watch.benchmarks.set([bench])
    return bench


class Pool:
    """The pool's one GPU worker, played: messages from the Redis queue, oldest first."""

    def __init__(self, repo, live_server, broker_url):
        self.repo, self.live_server = repo, live_server
        self.redis = redis.Redis.from_url(broker_url)
        self.claimed: list[Run] = []
        self.pushes = 0

    def push(self, commit: str) -> list[int]:
        payload = {"ref": "refs/heads/main", "before": "0" * 40, "after": commit, "deleted": False,
                   "repository": {"clone_url": self.repo["url"]}, "head_commit": {"id": commit}}
        body = json.dumps(payload).encode()
        response = httpx.post(f"{self.live_server.url}/webhooks/github/", content=body, timeout=30, headers={
            "Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(body)})
        assert response.status_code == 202, response.text
        self.pushes += 1
        return response.json()["runs"]

    def take(self) -> tuple[Run, str] | None:
        """Claim the next message's run (kombu's Redis lists: pushed left, taken right)."""
        while (raw := self.redis.rpop(QUEUE)) is not None:
            message = json.loads(raw)
            (run_id, _spec), _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            task_id = message["headers"]["id"]
            if claim.run_claim(run_id=run_id, task_id=task_id, worker_host="host-a"):
                run = Run.objects.get(id=run_id)
                self.claimed.append(run)
                return run, task_id
        return None

    def finish(self, run: Run, task_id: str) -> None:
        slow = "EXTRA_WORK = 1" in git(self.repo["path"], "show", f"{run.commit}:work.py")
        wobble = 1 + WOBBLE[len(self.claimed) % len(WOBBLE)] / 100
        tok_s = (10.0 if slow else 100.0) * wobble
        itl = 1000.0 / tok_s
        figures = {contract.DECODE_TOK_S: tok_s, contract.ITL_MS_P50: itl, contract.ITL_MS_P90: 1.1 * itl,
                   contract.ITL_MS_P99: 1.3 * itl, contract.TTFT_MS: 20.0 * wobble}
        result = {"measurements": [contract.measurement(name, v, samples=[v] * 3) for name, v in figures.items()]
                  + [contract.measurement(contract.CORRECT, 1.0)]}
        assert complete.run_complete(run_id=run.id, result=result, task_id=task_id)

    def run_all(self, until=None) -> None:
        while (taken := self.take()) is not None:
            self.finish(*taken)
            if until is not None and until():
                return


def test_a_10x_slower_push_costs_one_confirmation_per_variant_and_one_bisection_and_later_pushes_go_first(
        watched, repo, live_server, redis_broker):
    c = repo["commits"]
    pool = Pool(repo, live_server, redis_broker)
    for i in (1, 3, 5, 7, 9):  # the history: five pushes at the fast level
        pool.push(c[i])
        pool.run_all()

    slow_runs = pool.push(c[13])  # c11 made it slow: the range c9..c13 holds four commits
    eager, task_id = pool.take()
    pool.finish(eager, task_id)
    compiled, task_id = pool.take()
    later_push = pool.push(c[14])  # while the slow push's second run is running
    pool.finish(compiled, task_id)
    assert sorted(slow_runs) == sorted([eager.id, compiled.id])

    # Every speed metric of both variants changed; each variant has one confirmation run, held.
    changes = ChangePoint.objects.filter(commit=c[13])
    assert {(cp.variant.name, cp.metric) for cp in changes} == {
        (v, m) for v in ("eager", "compiled") for m in SPEED_METRICS}
    confirmations = {cp.variant.name: cp.confirm_run for cp in changes}
    assert {cp.confirm_run_id for cp in changes} == {confirmations["eager"].id, confirmations["compiled"].id}
    assert len(set(confirmations.values())) == 2 and {r.priority for r in confirmations.values()} == {1}
    assert confirmation_due(run=eager) and confirmation_due(run=compiled)
    assert {r.sent_at for r in Run.objects.filter(id__in=[r.id for r in confirmations.values()])} == {None}

    # Then the bisection: one probe is under way when another push comes; it goes before the next probe.
    pool.run_all(until=lambda: BisectStep.objects.filter(role="probe").exists())
    probe_run, task_id = pool.take()
    assert BisectStep.objects.get(run=probe_run).role == "probe"
    newest = pool.push(c[15])
    pool.finish(probe_run, task_id)
    pool.run_all()

    order = [r.id for r in pool.claimed]
    confirmation_ids = {r.id for r in confirmations.values()}
    bisection_ids = set(BisectStep.objects.values_list("run_id", flat=True))
    assert max(order.index(i) for i in later_push) < min(order.index(i) for i in confirmation_ids | bisection_ids)
    assert len(bisection_ids) >= 2 and all(order.index(i) < order.index(s) for i in newest
                                           for s in bisection_ids - {probe_run.id})

    # The counts: one confirmation run per affected variant, one bisection, to the guilty commit.
    assert regression_costs(c[13]) == {"changes": {v: sorted(SPEED_METRICS) for v in ("eager", "compiled")},
                                       "confirmation_runs": {"eager": 1, "compiled": 1}, "bisections": 1}
    scheduled = Run.objects.filter(trigger=Run.Trigger.SCHEDULE)
    assert set(scheduled.exclude(bisect_steps__isnull=False).values_list("id", flat=True)) == confirmation_ids
    (bisection,) = Bisection.objects.all()
    assert (bisection.state, bisection.first_bad) == ("found", c[SLOW_FROM])
    assert bisection.metric == contract.DECODE_TOK_S
    assert len(bisection_ids) == 2  # c11 then c10 of c10..c13; the ends are known from the change
    assert Run.objects.count() == 2 * pool.pushes + len(confirmation_ids) + len(bisection_ids)
    for change in ChangePoint.objects.filter(commit=c[13]):
        assert (change.confirmation, change.status, change.confirm_attempts) == ("agreed", "confirmed", 1)
    assert not confirmation_due(run=eager) and not confirmation_due(run=compiled)

    # Each confirmation run is judged against the history before the slow run, never with it.
    for rerun in confirmations.values():
        verdict = rerun.verdicts.get(metric=contract.DECODE_TOK_S)
        suspect = eager if rerun.variant.name == "eager" else compiled
        assert verdict.kind == "regression" and verdict.effect < -0.8
        assert suspect.id not in verdict.baseline_runs and len(verdict.baseline_runs) == 5
        assert f"before run #{suspect.id}" in verdict.baseline_description
