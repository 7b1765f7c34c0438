"""A pull request as the page and the API tests see it, made directly in the database:
github.com/acme/vllm#12 from a fork, watched with two benchmarks.

Head H1 was compared first (tiny-a regressed, tiny-b cancelled by the next push); head H2 is
the latest: tiny-a done and passed (one base and one head run of eager), tiny-b running."""
import uuid
from dataclasses import dataclass

from benchsite.bench.models import Benchmark, Run
from benchsite.integrations.models import RepoWatch
from benchsite.integrations.pulls.models import Comparison, PullAction, PullRequest, PullRun

from ..conftest import make_benchmark

REPO = "https://github.com/acme/vllm"
H1, H2, BASE = "1" * 40, "2" * 40, "b" * 40
ROW = {"variant": "eager", "outcome": "passed", "metric": "decode_tok_s", "unit": "tok/s", "base": 41.2,
       "head": 40.9, "effect": -0.0073, "ci_low": -0.02, "ci_high": 0.006, "threshold": 0.03,
       "correctness": "identical", "correctness_reason": "same greedy tokens", "share_base": 0.42,
       "share_head": 0.40, "took_effect": "", "base_runs": [], "head_runs": [], "note": "",
       "metrics": [{"metric": "decode_tok_s", "word": "passed"},
                   {"metric": "itl_ms_p50", "unit": "ms", "base": 24.3, "head": 26.1, "effect": 0.074,
                    "ci_low": 0.05, "ci_high": 0.1, "threshold": 0.05, "word": "regressed"}]}


@dataclass
class Scene:
    pull: PullRequest
    benchmarks: list[Benchmark]
    latest: Comparison        # tiny-a at H2, done
    running: Comparison       # tiny-b at H2
    base_run: Run
    head_run: Run
    other_run: Run            # a run of no PR


def _run(benchmark: Benchmark, commit: str, state: str = "SUCCEEDED") -> Run:
    return Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(name="eager"), batch=uuid.uuid4(),
                              state=state, commit=commit, ref=commit)


def comparison(pull, benchmark, head_sha, state, outcome="", **extra) -> Comparison:
    return Comparison.objects.create(pull=pull, benchmark=benchmark, head_sha=head_sha, base_branch="main",
                                     base_tip=BASE, state=state, outcome=outcome, **extra)


def pull_scene() -> Scene:
    benchmarks = [make_benchmark("tiny-a", REPO + ".git"), make_benchmark("tiny-b", REPO + ".git")]
    watch = RepoWatch.objects.create(repo_url=REPO, branches=["main"], secret_env="X")
    watch.benchmarks.set(benchmarks)
    pull = PullRequest.objects.create(
        watch=watch, provider="github", repo_key="github.com/acme/vllm", number=12, title="Fuse RMSNorm into the GEMM",
        author="alice", url=REPO + "/pull/12", base_branch="main", head_branch="fuse-rms", head_sha=H2,
        head_repo="github.com/bob/vllm", is_fork=True, labels=["perf"])
    tiny_a, tiny_b = benchmarks
    comparison(pull, tiny_a, H1, "done", "regressed", summary="eager decode -5.1%")
    comparison(pull, tiny_b, H1, "cancelled")
    latest = comparison(pull, tiny_a, H2, "done", "passed", summary="no change past 3%", host="gpu-7",
                        merge_base=BASE, requested_by="carol", table=[dict(ROW)])
    base_run, head_run = _run(tiny_a, BASE), _run(tiny_a, H2)
    PullRun.objects.create(run=base_run, comparison=latest, role="base")
    PullRun.objects.create(run=head_run, comparison=latest, role="head")
    latest.table[0].update(base_runs=[base_run.id], head_runs=[head_run.id])
    latest.save()
    running = comparison(pull, tiny_b, H2, "running", host="gpu-7")
    PullRun.objects.create(run=_run(tiny_b, BASE, "RUNNING"), comparison=running, role="base")
    PullAction.objects.create(pull=pull, head_sha=H2, kind="label", actor="carol", association="MEMBER",
                              accepted=True, detail="label perf added: runs approved")
    PullAction.objects.create(pull=pull, head_sha=H2, kind="/bench", actor="mallory", association="NONE",
                              accepted=False, detail="only members and collaborators may ask for runs")
    return Scene(pull=pull, benchmarks=benchmarks, latest=latest, running=running, base_run=base_run,
                 head_run=head_run, other_run=_run(tiny_a, H1))
