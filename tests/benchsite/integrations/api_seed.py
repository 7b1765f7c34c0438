"""A database for comparing the JSON API's answers byte for byte (test_api_unchanged.py): every
row that an answer shows has a fixed id and fixed times, so the answers are the same on SQLite
and PostgreSQL, run after run.

- golden-a (a git engine, two workload points, pool golden-served, which a worker serves):
  SHA_A's eager run succeeded and was judged incorrect, its compiled run failed, a twin commit
  shares SHA_A's first 8 characters, SHA_C has only a bisection's run; verdicts and change
  points for the chart's marks.
- golden-b (the installed engine, pool golden-unseen, which no worker ever served): a queued
  confirmation run of SHA_B.
- github.com/acme/vllm#12 (a fork): an earlier head compared, the latest head with one
  comparison done (a base and a head run) and one running; gitlab.com/g/sub/vllm!3 with nothing
  to compare.
- tokens: a member's, a viewer's (not in BENCH_MEMBER_GROUP) and a revoked one.

A comparison's table is JSON stored as PostgreSQL's jsonb, which keeps an object's keys shorter
first, then in byte order: the rows are written in that order, which SQLite keeps as written."""
import hashlib
from datetime import datetime, timedelta, timezone as tz

from django.contrib.auth.models import Group, User

from benchsite.bench.models import Benchmark, EngineSource, Measurement, PoolWorker, Run, Variant
from benchsite.integrations.models import ApiToken, RepoWatch
from benchsite.integrations.pulls.models import Comparison, PullAction, PullRequest, PullRun
from benchsite.regressions.models import Bisection, BisectStep, ChangePoint, Verdict
from benchsite.regressions.outcomes import outcomes_refresh

T0 = datetime(2026, 11, 2, 9, 30, 0, 123456, tzinfo=tz.utc)
SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40
TWIN = SHA_A[:8] + "f" * 32
H1, H2, BASE = "1" * 40, "2" * 40, "d" * 40
C16 = "c16-p8192-m256"
MEMBER_GROUP = "members"
MEMBER_TOKEN, VIEWER_TOKEN, REVOKED_TOKEN = "dbt_golden-member", "dbt_golden-viewer", "dbt_golden-revoked"
RUN = 910_000  # the seeded runs' ids: RUN + 1, ...; far above what a sequence hands out in the tests


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _token(user: User, raw: str, *, revoked: bool = False) -> None:
    ApiToken.objects.create(user=user, name=raw, token_sha256=hashlib.sha256(raw.encode()).hexdigest(),
                            prefix=raw[:10], revoked=revoked)


def _variant(pk: int, benchmark: Benchmark, position: int, name: str, **extra) -> Variant:
    return Variant.objects.create(id=pk, benchmark=benchmark, position=position, name=name, **extra)


def _run(n: int, variant: Variant, minutes: float, *, state: str = "SUCCEEDED", commit: str = "", ref: str = "",
         finished: bool = True, **extra) -> Run:
    run = Run.objects.create(id=RUN + n, benchmark=variant.benchmark, variant=variant, state=state, commit=commit,
                             ref=ref, batch=f"00000000-0000-0000-0000-{n:012d}", **extra)
    Run.objects.filter(id=run.id).update(created_at=at(minutes), started_at=at(minutes + 1) if finished else None,
                                         finished_at=at(minutes + 9) if finished else None)
    run.refresh_from_db()
    return run


def _measure(run: Run, metric: str, value: float, unit: str = "", *, point: str = "c1-p0-m64", first: bool = True,
             ci: tuple[float, float] | None = None) -> None:
    Measurement.all_points.create(run=run, metric=metric, value=value, unit=unit, point=point, first_point=first,
                                  ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None)


def jsonb_ordered(value):
    """VALUE with each object's keys in the order PostgreSQL's jsonb keeps them: shorter first, then bytes."""
    if isinstance(value, dict):
        return {key: jsonb_ordered(value[key]) for key in sorted(value, key=lambda k: (len(k.encode()), k.encode()))}
    return [jsonb_ordered(item) for item in value] if isinstance(value, list) else value


# One comparison row as comparison.py writes it.
ROW = jsonb_ordered({"base": 41.2, "head": 40.9, "note": "", "unit": "tok/s", "level": 0.99, "ci_low": -0.02, "effect": -0.0073,
       "metric": "decode_tok_s", "starts": {"base": 1, "head": 1}, "ci_high": 0.006, "decided": True,
       "metrics": [{"word": "passed", "metric": "decode_tok_s"},
                   {"base": 24.3, "head": 26.1, "unit": "ms", "word": "regressed", "effect": 0.074, "ci_low": 0.05,
                    "metric": "itl_ms_p50", "ci_high": 0.1, "threshold": 0.05}],
       "outcome": "passed", "variant": "eager", "base_runs": [RUN + 7], "head_runs": [RUN + 8],
       "threshold": 0.03, "share_base": 0.42, "share_head": 0.4, "correctness": "identical", "took_effect": "",
       "visible_at_cap": None, "correctness_reason": "same greedy tokens \u2014 token for token"})


def api_seed() -> None:
    members = Group.objects.create(name=MEMBER_GROUP)
    member = User.objects.create_user("member", password="x")
    member.groups.add(members)
    _token(member, MEMBER_TOKEN)
    _token(User.objects.create_user("viewer", password="x"), VIEWER_TOKEN)
    _token(member, REVOKED_TOKEN, revoked=True)
    User.objects.create_user("browser", password="x")  # a session user (no token)

    git = EngineSource.objects.create(name="vllm", kind="git", repo_url="https://github.com/acme/vllm.git")
    a = Benchmark.objects.create(name="golden-a", slug="golden-a", model="/models/tiny", engine_source=git,
                                 gpu_pool="golden-served", max_tokens=64,
                                 workloads=[{"max_tokens": 64},
                                            {"concurrency": 16, "prompt_tokens": 8192, "max_tokens": 256}])
    b = Benchmark.objects.create(name="golden-b", slug="golden-b", model="/models/tiny", gpu_pool="golden-unseen",
                                 max_tokens=64)
    eager, compiled = (_variant(920_001, a, 1, "eager", flags=["--enforce-eager"], is_reference=True),
                       _variant(920_002, a, 2, "compiled"))
    b_eager = _variant(920_003, b, 1, "eager", is_reference=True)
    PoolWorker.objects.create(pool="golden-served", worker="gpu@golden-host", last_seen_at=datetime.now(tz.utc))

    # golden-a's history: SHA_A judged incorrect (though fast), its compiled run failed, a twin commit.
    done = _run(1, eager, 0, commit=SHA_A, ref="main", branch="main", trigger="webhook")
    _measure(done, "decode_tok_s", 100.0, "tok/s", ci=(98.5, 101.5))
    _measure(done, "decode_tok_s", 1500.0, "tok/s", point=C16, first=False, ci=(1400.0, 1600.0))
    _measure(done, "ttft_ms", 900.0, "ms", point=C16, first=False)
    for metric, value in (("correct", 0.0), ("allreduce_share", 0.084778), ("ceiling_tok_s", 381.77)):
        _measure(done, metric, value)
    Verdict.objects.create(run=done, metric="decode_tok_s", kind="no_change", effect=0.02, ci_low=-0.01, ci_high=0.05,
                           threshold=0.005, threshold_source="floor", noise=0.0008, noise_starts=14)
    Verdict.objects.create(run=done, metric="itl_ms_p50", kind="not_enough_data", threshold=0.03)
    Verdict.objects.create(run=done, metric="correct", kind="regression", threshold=0.0)
    _run(2, compiled, 0, state="FAILED", commit=SHA_A, ref="main", failure_kind="engine",
         error="engine died: CUDA error \u2014 out of memory <see the server log> \u00e9")
    twin = _run(3, eager, 20, commit=TWIN, ref="main", branch="main")
    _measure(twin, "decode_tok_s", 80.0, "tok/s")
    Verdict.objects.create(run=twin, metric="decode_tok_s", kind="regression", effect=-0.2, ci_low=-0.25,
                           ci_high=-0.15, threshold=0.03, threshold_source="noise", noise=0.01, noise_starts=6)
    Verdict.objects.create(run=twin, metric="decode_tok_s", point=C16, kind="improvement", effect=0.1, ci_low=0.05,
                           ci_high=0.15, threshold=0.03)
    ChangePoint.objects.create(id=930_001, benchmark=a, variant=eager, series_key="golden", metric="decode_tok_s",
                               run=twin, previous_run=done, index=1, commit=TWIN, previous_commit=SHA_A, before=100.0,
                               after=80.0, change=-0.2, is_regression=True)
    ChangePoint.objects.create(id=930_002, benchmark=a, variant=eager, series_key="golden", metric="decode_tok_s",
                               point=C16, run=twin, index=1, commit=TWIN, before=1500.0, after=1650.0, change=0.1,
                               status="expected")
    # SHA_C has only a bisection's run: it decides no commit.
    probe = _run(4, eager, 30, commit=SHA_C, ref=SHA_C, priority=Run.Priority.BACKGROUND, trigger="cli")
    bisection = Bisection.objects.create(benchmark=a, variant=eager, metric="decode_tok_s", branch="main",
                                         good_commit=SHA_A, bad_commit=TWIN)
    BisectStep.objects.create(bisection=bisection, commit=SHA_C, run=probe)

    # golden-b: a queued confirmation on a pool no worker ever served.
    _run(5, b_eager, 40, state="QUEUED", commit=SHA_B, ref="perf/x", branch="perf/x", finished=False,
         priority=Run.Priority.CONFIRM)

    _pulls(a, b, eager)
    outcomes_refresh(run_ids=[RUN + n for n in range(1, 11)])


def _comparison(pk: int, pull: PullRequest, benchmark: Benchmark, head_sha: str, state: str, minutes: float,
                **extra) -> Comparison:
    comparison = Comparison.objects.create(id=pk, pull=pull, benchmark=benchmark, head_sha=head_sha,
                                           base_branch="main", base_tip=BASE, state=state, **extra)
    Comparison.objects.filter(id=pk).update(created_at=at(minutes),
                                            finished_at=at(minutes + 30) if state == "done" else None)
    return comparison


def _pulls(a: Benchmark, b: Benchmark, eager: Variant) -> None:
    watch = RepoWatch.objects.create(repo_url="https://github.com/acme/vllm", branches=["main"], secret_env="X")
    watch.benchmarks.set([a, b])
    pull = PullRequest.objects.create(
        watch=watch, provider="github", repo_key="github.com/acme/vllm", number=12,
        title="Fuse RMSNorm into the GEMM \u2014 \u2713", author="alice", url="https://github.com/acme/vllm/pull/12",
        base_branch="main", head_branch="fuse-rms", head_sha=H2, head_repo="github.com/bob/vllm", is_fork=True)
    _comparison(940_001, pull, a, H1, "done", 50, outcome="regressed", summary="eager decode -5.1%")
    _comparison(940_002, pull, a, H2, "done", 60, outcome="passed", summary="no change past 3%", host="gpu-7",
                merge_base=BASE, requested_by="carol", table=[ROW], starts_per_side=1, max_starts_per_side=6,
                accepted_by="carol")
    Comparison.objects.filter(id=940_002).update(accepted_at=at(95))
    latest = Comparison.objects.get(id=940_002)
    running = _comparison(940_003, pull, b, H2, "running", 61, host="gpu-7")
    b_eager = b.variants.get()
    base_run = _run(7, eager, 62, commit=BASE, ref=BASE, trigger="pull")
    head_run = _run(8, eager, 63, commit=H2, ref=H2, trigger="pull")
    _measure(head_run, "decode_tok_s", 40.9, "tok/s")
    PullRun.objects.create(run=base_run, comparison=latest, role="base")
    PullRun.objects.create(run=head_run, comparison=latest, role="head")
    PullRun.objects.create(run=_run(9, b_eager, 64, state="RUNNING", commit=BASE, ref=BASE, trigger="pull",
                                    finished=False), comparison=running, role="base")
    _run(10, eager, 65, commit=H1, ref="main", branch="main")  # a run of no pull request
    for pk, minutes, extra in ((950_001, 55, {"kind": "label", "actor": "carol", "association": "MEMBER",
                                              "accepted": True, "detail": "label perf added: runs approved"}),
                               (950_002, 56, {"kind": "/bench", "actor": "mallory", "association": "NONE",
                                              "detail": "only members and collaborators may ask for runs"})):
        PullAction.objects.create(id=pk, pull=pull, head_sha=H2, **extra)
        PullAction.objects.filter(id=pk).update(at=at(minutes))

    lab = RepoWatch.objects.create(repo_url="https://gitlab.com/g/sub/vllm", branches=["main"], secret_env="X")
    PullRequest.objects.create(watch=lab, provider="gitlab", repo_key="gitlab.com/g/sub/vllm", number=3,
                               title="Nothing to compare", url="https://gitlab.com/g/sub/vllm/-/merge_requests/3",
                               base_branch="main", head_sha=H1, state="merged")
