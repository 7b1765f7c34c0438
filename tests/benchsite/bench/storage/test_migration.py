"""bench 0009: artifacts stored as text in the database move into the artifact storage."""
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from .conftest import files_under

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE, AFTER = ("bench", "0008_run_host_fingerprint"), ("bench", "0009_artifact_storage")


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return MigrationExecutor(connection).loader.project_state([target]).apps


def test_text_in_the_database_moves_into_the_storage_and_back(fs_storage):
    apps = _migrate(BEFORE)
    try:
        Benchmark, Variant, Run, Artifact = (apps.get_model("bench", m) for m in ("Benchmark", "Variant", "Run",
                                                                                  "Artifact"))
        benchmark = Benchmark.objects.create(name="old", slug="old", model="m")
        variant = Variant.objects.create(benchmark=benchmark, name="eager", position=0)
        run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4())
        Artifact.objects.create(run=run, kind="server_log", name="vllm-serve.log", content="INFO é ready\n" * 1000)

        Artifact = _migrate(AFTER).get_model("bench", "Artifact")
        moved = Artifact.objects.get()
        assert moved.file.startswith(f"runs/{run.id}/") and moved.size == len(("INFO é ready\n" * 1000).encode())
        assert (fs_storage / moved.file).read_text() == "INFO é ready\n" * 1000 and len(moved.sha256) == 64
        assert files_under(fs_storage) == [moved.file]

        back = _migrate(BEFORE).get_model("bench", "Artifact").objects.get()
        assert back.content == "INFO é ready\n" * 1000
    finally:  # every app's latest: going back unapplied the other apps' migrations that follow bench's
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
