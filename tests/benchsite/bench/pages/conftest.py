"""Fixtures for the web tests: a benchmark with a three-step ladder and a history of runs."""
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import results
from benchsite.bench.models import Artifact, Benchmark, Measurement, Run, Variant
from benchsite.regressions.outcomes import outcomes_refresh

# (batch offset in hours, {variant position: (state, decode tok/s or None)})
HISTORY = [
    (-48, {1: ("SUCCEEDED", 49.5), 2: ("SUCCEEDED", 297.9), 3: ("SUCCEEDED", 276.0)}),
    (-24, {1: ("SUCCEEDED", 48.7), 2: ("FAILED", None), 3: ("SUCCEEDED", 275.4)}),
    (-2, {1: ("SUCCEEDED", 50.1), 2: ("SUCCEEDED", 301.2), 3: ("CANCELLED", None)}),
    (-0.5, {1: ("RUNNING", None), 2: ("QUEUED", None)}),
]


@pytest.fixture
def ladder_benchmark(db):
    benchmark = Benchmark.objects.create(
        name="Llama-8B TP=2", slug="llama-8b-tp2", model="/models/llama-8b-random", tensor_parallel_size=2,
        gpu_pool="h200x2", max_tokens=256, repeats=5,
    )
    Variant.objects.create(benchmark=benchmark, position=1, name="eager", flags=["--enforce-eager"], is_reference=True)
    Variant.objects.create(benchmark=benchmark, position=2, name="cuda graphs")
    Variant.objects.create(
        benchmark=benchmark, position=3, name="nccl LL", flags=["--disable-custom-all-reduce"], env={"NCCL_PROTO": "LL"}
    )
    pools.pool_workers_seen(worker="gpu@test-host", pools=[benchmark.gpu_pool])  # a GPU worker serves its pool
    return benchmark


@pytest.fixture
def history(ladder_benchmark):
    """Runs in four batches; returns {(batch index, position): Run}."""
    now = timezone.now()
    variants = {v.position: v for v in ladder_benchmark.variants.all()}
    runs = {}
    for index, (hours, cells) in enumerate(HISTORY):
        batch = uuid.uuid4()
        created = now + timedelta(hours=hours)
        for position, (state, tok_s) in cells.items():
            run = Run.objects.create(
                benchmark=ladder_benchmark, variant=variants[position], batch=batch, state=state,
                commit="0123abcd" * 5 if index == 2 else "",
                phase="done" if state == "SUCCEEDED" else ("probe: decode" if state == "RUNNING" else ""),
                worker_host="gpu-1" if state != "QUEUED" else "",
                error="Traceback (most recent call last):\n  RuntimeError: CUDA out of memory" if state == "FAILED" else "",
            )
            # created_at is auto_now_add: set the history's times afterwards.
            Run.objects.filter(pk=run.pk).update(
                created_at=created,
                started_at=created + timedelta(seconds=30) if state != "QUEUED" else None,
                finished_at=created + timedelta(minutes=5) if state in Run.FINAL_STATES else None,
                heartbeat_at=created + timedelta(minutes=4 if state in Run.FINAL_STATES else 25) if state != "QUEUED" else None,
            )
            run.refresh_from_db()
            if tok_s is not None:
                Measurement.objects.create(
                    run=run, metric="decode_tok_s", value=tok_s, unit="tok/s", direction="higher",
                    samples=[tok_s - 1, tok_s, tok_s + 0.5, tok_s - 0.2, tok_s + 1],
                    ci_low=tok_s - 1, ci_high=tok_s + 1,
                )
                Measurement.objects.create(
                    run=run, metric="ttft_ms", value=1000 / tok_s * 3, unit="ms", direction="lower", samples=[1, 2],
                )
            runs[(index, position)] = run
    outcomes_refresh(run_ids=[run.pk for run in runs.values()])
    return runs


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def auth_client(client, user):
    client.force_login(user)
    return client


def add_server_log(run, lines: int):
    return results.artifact_create(
        run=run, kind=Artifact.Kind.SERVER_LOG, name="server.log",
        content="\n".join(f"INFO log line {i}" for i in range(1, lines + 1)),
    )


@pytest.fixture
def queued(monkeypatch):
    """Run ids the trigger would send to the broker, instead of sending them."""
    from benchsite.bench.lifecycle import dispatch

    calls = []
    monkeypatch.setattr(dispatch, "enqueue_run", lambda run_id, *args, **kwargs: calls.append(run_id))
    return calls
