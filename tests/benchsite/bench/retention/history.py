"""A benchmark's old history with one run for each keep rule of the retention policy, its files
stored through the real storage and its protections recorded as the services record them."""
import json
import uuid
from datetime import timedelta

from django.utils import timezone

from benchsite.bench.lifecycle import results
from benchsite.bench.models import Annotation, Artifact, Benchmark, Measurement, Run, Variant
from benchsite.integrations.models import RepoWatch
from benchsite.integrations.pulls.models import Comparison, PullRequest, PullRun
from benchsite.regressions.models import ChangePoint

OLD = timezone.now() - timedelta(days=200)
FILES = (("server_log", "server.log", "INFO ready\n" * 50), ("build_log", "build.log", "built\n" * 20),
         ("profiler_trace", "trace.json", "{\"traceEvents\": []}" * 100),
         ("probe_json", "greedy.json", json.dumps({"token_ids": [1, 2, 3]})))


def _run(variant: Variant, *, commit: str = "", created=OLD, trigger=Run.Trigger.WEBHOOK) -> Run:
    run = Run.objects.create(benchmark=variant.benchmark, variant=variant, batch=uuid.uuid4(), commit=commit,
                             state=Run.State.SUCCEEDED, trigger=trigger)
    for kind, name, content in FILES:
        results.artifact_create(run=run, kind=kind, name=name, content=content)
    Measurement.objects.create(run=run, metric="decode_tok_s", value=100.0, unit="tok/s", direction="higher")
    Run.objects.filter(pk=run.pk).update(created_at=created, finished_at=created)
    Artifact.objects.filter(run=run).update(created_at=created)
    return run


def _change_point(benchmark, variant, run, previous, **fields) -> ChangePoint:
    return ChangePoint.objects.create(benchmark=benchmark, variant=variant, series_key="s", metric="decode_tok_s",
                                      run=run, previous_run=previous, index=5, before=100.0, after=90.0, **fields)


def _pull_run(benchmark, run: Run, number: int, state: str) -> None:
    watch, _ = RepoWatch.objects.get_or_create(repo_url="https://github.com/vllm-project/vllm",
                                               defaults={"secret_env": "HOOK_SECRET"})
    pull = PullRequest.objects.create(watch=watch, provider="github", repo_key=watch.repo_key, number=number,
                                      base_branch="main", head_sha="f" * 40, state=state)
    comparison = Comparison.objects.create(pull=pull, benchmark=benchmark, head_sha="f" * 40, base_branch="main")
    PullRun.objects.create(run=run, comparison=comparison, role=PullRun.Role.HEAD)


def build() -> dict[str, Run]:
    """{name: run}; the names say which rule keeps the run's files (or `plain`, `recent`: none)."""
    benchmark = Benchmark.objects.create(name="retained", slug="retained", model="/models/tiny")
    ref = Variant.objects.create(benchmark=benchmark, position=1, name="eager", is_reference=True)
    other = Variant.objects.create(benchmark=benchmark, position=2, name="graphs")
    runs = {"plain": _run(other), "recent": _run(other, created=timezone.now()),
            "old_reference": _run(ref, created=OLD - timedelta(days=2)), "reference": _run(ref),
            "disagreed": _run(other), "cp_after": _run(other), "cp_before": _run(other),
            "regression": _run(other), "regression_before": _run(other), "confirmation": _run(other),
            "pull_open": _run(other, trigger=Run.Trigger.PULL), "pull_closed": _run(other, trigger=Run.Trigger.PULL),
            "by_commit": _run(other, commit="abcdef12" * 5), "by_date": _run(other, created=OLD - timedelta(days=10))}
    Measurement.objects.create(run=runs["disagreed"], metric="correct", value=0.0,
                               details={"reference_run": runs["old_reference"].id, "correct": False})
    _change_point(benchmark, other, runs["cp_after"], runs["cp_before"])
    _change_point(benchmark, other, runs["regression"], runs["regression_before"], is_regression=True,
                  status=ChangePoint.Status.CONFIRMED, confirm_run=runs["confirmation"])
    _pull_run(benchmark, runs["pull_open"], 1, PullRequest.State.OPEN)
    _pull_run(benchmark, runs["pull_closed"], 2, PullRequest.State.CLOSED)
    Annotation.objects.create(benchmark=benchmark, text="new allocator", commit="abcdef12")
    Annotation.objects.create(benchmark=benchmark, text="driver 570", starts_at=OLD - timedelta(days=11),
                              ends_at=OLD - timedelta(days=9))
    return runs


KEPT_BY = {"reference": ["old_reference", "reference", "disagreed"], "change_point": ["cp_after", "cp_before"],
           "confirmed_regression": ["regression", "regression_before", "confirmation"], "open_pull": ["pull_open"],
           "annotated": ["by_commit", "by_date"]}
FREED = ["plain", "pull_closed"]
