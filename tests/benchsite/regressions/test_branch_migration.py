"""bench 0012: existing runs get the branch that is known of them (a push's, a ref that names the
main line or a watched branch, a re-run's from an earlier run at its commit); the rest none."""
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE, AFTER = ("bench", "0011_run_repeats"), ("bench", "0012_branch_run_branch")
SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40


def _migrate(target):
    """Bench at TARGET; the models of bench and of hooks (whose deliveries and watches it reads)."""
    MigrationExecutor(connection).migrate([target])
    loader = MigrationExecutor(connection).loader
    return loader.project_state([target, ("hooks", "0001_initial")]).apps


def test_existing_runs_get_their_branch_from_what_is_known():
    apps = _migrate(BEFORE)
    try:
        get = apps.get_model
        source = get("bench", "EngineSource").objects.create(name="vllm", kind="git", repo_url="https://x/o/vllm",
                                                             default_ref="main")
        git_bench = get("bench", "Benchmark").objects.create(name="git", slug="git", model="m", engine_source=source)
        installed = get("bench", "Benchmark").objects.create(name="inst", slug="inst", model="m")
        watch = get("hooks", "RepoWatch").objects.create(repo_url="https://x/o/vllm", repo_key="x/o/vllm",
                                                         branches=["main", "perf/*"], secret_env="S")
        watch.benchmarks.add(git_bench)
        Variant, Run = get("bench", "Variant"), get("bench", "Run")
        variant = Variant.objects.create(benchmark=git_bench, name="eager", position=0)
        other = Variant.objects.create(benchmark=installed, name="eager", position=0)

        def run(trigger, ref="", commit="", bench=git_bench):
            return Run.objects.create(benchmark=bench, variant=variant if bench == git_bench else other,
                                      batch=uuid.uuid4(), trigger=trigger, ref=ref, commit=commit).id

        runs = {
            "push to main": run("webhook", "main", SHA_A),
            "push to perf/x": run("webhook", "perf/x", SHA_B),
            "form, default ref": run("form", "", SHA_A),
            "form, refs/heads/main": run("form", "refs/heads/main", SHA_A),
            "API at a watched branch": run("api", "perf/y", SHA_C),
            "API at a commit": run("api", SHA_B, SHA_B),
            "form at a tag": run("form", "v1.0", SHA_A),
            "confirmation at a pushed commit": run("schedule", SHA_A, SHA_A),
            "bisection probe": run("schedule", "f" * 40, "f" * 40),
            "installed engine": run("cli", bench=installed),
        }
        delivery = get("hooks", "WebhookDelivery").objects.create(provider="github", accepted=True, branch="perf/x",
                                                                  commit=SHA_B)
        delivery.runs.add(runs["push to perf/x"])

        Run = _migrate(AFTER).get_model("bench", "Run")
        branches = dict(Run.objects.values_list("id", "branch"))
        assert {name: branches[pk] for name, pk in runs.items()} == {
            "push to main": "main",
            "push to perf/x": "perf/x",
            "form, default ref": "main",
            "form, refs/heads/main": "main",
            "API at a watched branch": "perf/y",
            "API at a commit": "",
            "form at a tag": "",
            "confirmation at a pushed commit": "main",
            "bisection probe": "",
            "installed engine": "",
        }
        back = _migrate(BEFORE).get_model("bench", "Run")
        assert not any(f.name == "branch" for f in back._meta.get_fields())
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
