"""A backup restores: runs seeded through the real services (trigger, claim, result, judgement),
the database dumped with pg_dump -Fc and restored with pg_restore into a fresh database, the
artifact folder copied beside it; the restored service serves the same pages (HTML byte for
byte, JSON equal as parsed). The recipe is docs/operations.md "Backup and restore"."""
import contextlib
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone

import psycopg
import pytest
from django.db import connection

from benchsite.bench.lifecycle import claim, tasks, trigger
from benchsite.bench.models import Artifact, Benchmark, EngineSource, Run
from benchsite.bench.storage import artifacts
from tests.conftest import ROOT

pytestmark = [pytest.mark.postgres_pass, pytest.mark.django_db(transaction=True)]

PINNED = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)  # "N months ago" reads the same on both sides


def _result(run, tokens: list[int], tok_s: float) -> dict:
    files = [{"kind": "server_log", "name": "vllm-serve.log", "content": f"INFO run {run.id} ready\n" * 40},
             {"kind": "probe_json", "name": "greedy.json",
              "content": json.dumps({"token_ids": tokens, "text": "hello", "logprobs": []})}]
    return {"measurements": [{"metric": "decode_tok_s", "value": tok_s, "unit": "tok/s", "direction": "higher",
                              "samples": [tok_s - 1, tok_s, tok_s + 1]},
                             {"metric": "ttft_ms", "value": 1000 / tok_s, "unit": "ms", "direction": "lower"}],
            "artifacts": artifacts.store_all(run.id, files)}


def _seed() -> tuple[Benchmark, list[Run]]:
    source = EngineSource.objects.create(name="vllm", kind=EngineSource.Kind.GIT,
                                         repo_url="https://github.com/vllm-project/vllm")
    benchmark = Benchmark.objects.create(name="restored", slug="restored", model="/models/tiny", max_tokens=8,
                                         repeats=3, engine_source=source)
    trigger.variant_create(benchmark=benchmark, name="eager", is_reference=True)
    trigger.variant_create(benchmark=benchmark, name="graphs")
    runs = []
    for n in range(4):
        batch = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API, commit=f"{n:02d}" * 20)
        for i, run in enumerate(batch):
            claim.run_claim(run_id=run.id, task_id=f"exec-{run.id}", worker_host="gpu-a")
            tokens = [7, 7, 7] if (n, i) == (3, 1) else [1, 2, 3]  # the last candidate's output differs
            assert tasks.record_result(run.id, _result(run, tokens, 50.0 + 10 * i + n), task_id=f"exec-{run.id}")
        runs += batch
    Run.objects.update(created_at=PINNED, started_at=PINNED, finished_at=PINNED, heartbeat_at=PINNED)
    return benchmark, runs


@contextlib.contextmanager
def _fresh_database(server: str):
    name = f"retain_restore_{os.getpid()}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _render(database_url: str, artifacts_dir, var_dir, paths: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "DJANGO_", "DATABASE_URL"))}
    env.update(DATABASE_URL=database_url, BENCH_ARTIFACTS_DIR=str(artifacts_dir), BENCH_VAR_DIR=str(var_dir))
    done = subprocess.run([sys.executable, "-m", "tests.deploy.render_pages", *paths], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _data(body: str) -> dict:
    """The JSON, less the one reading of the clock (seconds since the last heartbeat)."""
    data = json.loads(body)
    data.pop("heartbeat_age_s", None)
    return data


def test_a_dump_restored_into_a_fresh_database_serves_the_same_pages(sent, settings, tmp_path, client):
    if connection.vendor != "postgresql":
        pytest.fail("pg_dump needs PostgreSQL: run with DATABASE_URL=postgres://... (make test's PostgreSQL pass)")
    from benchsite.storage_config import filesystem_artifacts_storage

    folder = tmp_path / "artifacts"
    settings.STORAGES = {**settings.STORAGES, "artifacts": filesystem_artifacts_storage(folder)}
    benchmark, runs = _seed()
    assert Run.objects.filter(state=Run.State.SUCCEEDED).count() == 8
    assert runs[-1].measurements.get(metric="correct").value == 0.0  # judged on the way in

    db = connection.settings_dict
    server = f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    dump = tmp_path / "bench.dump"
    subprocess.run(["pg_dump", "-Fc", "-d", f"{server}/{db['NAME']}", "-f", str(dump)], check=True, timeout=120)
    shutil.copytree(folder, tmp_path / "restored-artifacts")  # the folder's backup, taken after the dump
    paths = ["/", f"/b/{benchmark.slug}/", f"/runs/{runs[-1].id}/", f"/runs/{runs[0].id}/",
             f"/api/benchmarks/{benchmark.slug}/chart/", f"/api/runs/{runs[-1].id}/"]
    original = {path: [r.status_code, r.content.decode()] for path in paths for r in [client.get(path)]}

    with _fresh_database(server) as name:
        subprocess.run(["pg_restore", "--no-owner", "--exit-on-error", "-d", f"{server}/{name}", str(dump)],
                       check=True, timeout=120)
        restored = _render(f"{server}/{name}", tmp_path / "restored-artifacts", tmp_path / "var", paths)

    for path in paths:
        assert original[path][0] == restored[path][0] == 200, path
        if path.startswith("/api/"):
            assert _data(original[path][1]) == _data(restored[path][1]), path
        else:
            assert original[path][1] == restored[path][1], path
    run_page = restored[f"/runs/{runs[-1].id}/"][1]
    assert f"INFO run {runs[-1].id} ready" in run_page  # the log tail, read from the restored folder
    assert Artifact.objects.filter(run=runs[-1]).count() == 2
