"""What a kept spec is keyed by, its settings digest and the spec.json of a run that points at it
are pinned: series are keyed by the digest, a kept row is found again by its key, and a run's
spec.json shows what it was sent. Each figure below was computed before the job spec's shapes
moved into the contract (runners/contract.py); a change to any of them is a change of what
existing rows mean."""
import hashlib
import uuid

import pytest

from benchsite.bench.lifecycle import jobspec
from benchsite.bench.lifecycle.trigger import patch_create, runs_trigger
from benchsite.bench.models import Benchmark, EngineSource, KeptSpec, Patch, Run
from runners import contract

pytestmark = pytest.mark.django_db
REPO = "https://github.com/acme/vllm.git"
SHA_A = "a" * 40
PATCH = "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n"
UPLOAD = "--- a\n+++ b\n@@ -1 +1 @@\n-m\n+n\n"

# A kept spec as the database holds it (git engine, the run's ref and commit null), and its figures.
KEPT = {
    "model": "/models/llama-8b", "prompt": "Hello", "max_tokens": 64, "repeats": 5, "run_id": None,
    "tensor_parallel_size": 2, "warmup": 1, "engine_args": ["--max-model-len", "1024", "--enforce-eager"],
    "engine_env": {"VLLM_X": "1"}, "startup_timeout_s": 600, "probes": None,
    "engine": {"kind": "git", "repo": REPO, "ref": None, "commit": None, "merge_base_with": ""},
    "patches": [{"name": "shared.diff", "content": PATCH, "sha256": hashlib.sha256(PATCH.encode()).hexdigest(),
                 "origin": "benchmark"}],
    "workloads": [{"max_tokens": 64, "concurrency": 1}, {"max_tokens": 32, "concurrency": 4, "prompt_tokens": 512}],
    "packages": ["vllm-gguf-plugin==0.0.5"], "schema": 1,
}
KEPT_KEY = "dce4c32d7cee315032d1bbf0b4a86f720a9e9003b01ecbd26670d211478bb392"
KEPT_SETTINGS = "d17b9074be03023b245ddab35b63fd5e08c7d0bc677dbd82bfcdd2a6013dafd4"
# /runs/<id>/spec.json of a run at SHA_A, ref main, with one uploaded patch, pointing at KEPT
SPEC_JSON_SHA256 = "2501ea389d941135ebf07e9923c6c547ee3e99e2c712e7410859a9808ae2bd74"

# A benchmark made today (installed engine, defaults), one variant: its template's figures.
BUILT_KEY = "9b02abb2c29c28e8d4fadd38f6ea5c81881755db246fc8fc12b480455a98de5a"
BUILT_SETTINGS = "e598df67944053de5f1bb9f5925e403f79008ffc31300386f1f887ada54963bf"
# the same with a git engine source, packages, workloads and a benchmark patch, at a commit
GIT_BUILT_KEY = "2e3a26516288f87eef2d397ef6cd0d6bb881be53c756a55f99facfcadfeee49e"
GIT_BUILT_SETTINGS = "b928cb985766b7a80573c1a6927d740169f8fc30192adc3a0736b9c7434f2cc0"


def test_a_kept_row_keeps_its_key_and_settings_digest():
    assert contract.spec_key(KEPT) == KEPT_KEY
    assert contract.settings_digest(KEPT) == KEPT_SETTINGS


def test_the_spec_json_of_a_run_that_points_at_a_kept_row_is_as_it_was(client):
    source = EngineSource.objects.create(name="src", kind=EngineSource.Kind.GIT, repo_url=REPO, default_ref="main")
    benchmark = Benchmark.objects.create(name="b", slug="b", model="/models/other", engine_source=source)
    variant = benchmark.variants.create(position=1, name="eager")
    row = KeptSpec.objects.create(sha256=KEPT_KEY, spec=KEPT, settings=KEPT_SETTINGS)
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), ref="main", commit=SHA_A,
                             kept_spec=row)
    run.patches.set([Patch.objects.create(name="mine.diff", content=UPLOAD)])
    response = client.get(f"/runs/{run.pk}/spec.json")
    assert response["X-Job-Spec"] == "as sent"
    text = response.content.decode().replace(f'"run_id": {run.pk}', '"run_id": 0')
    assert hashlib.sha256(text.encode()).hexdigest() == SPEC_JSON_SHA256, text


def _built(benchmark, **run) -> dict:
    return jobspec.spec_template(benchmark, benchmark.variants.get(), repeats=None, **run)


def test_a_spec_built_today_digests_as_before():
    benchmark = Benchmark.objects.create(name="inst", slug="inst", model="/models/m")
    benchmark.variants.create(position=1, name="eager", flags=["--enforce-eager"], env={"VLLM_Y": "2"})
    template = _built(benchmark, ref="", commit="", merge_base_with="")
    assert (contract.spec_key(template), contract.settings_digest(template)) == (BUILT_KEY, BUILT_SETTINGS), template
    source = EngineSource.objects.create(name="src", kind=EngineSource.Kind.GIT, repo_url=REPO, default_ref="main")
    Benchmark.objects.filter(id=benchmark.id).update(engine_source=source, packages=["vllm-gguf-plugin==0.0.5"],
                                                     workloads=[{"concurrency": 4, "max_tokens": 32}])
    benchmark.refresh_from_db()
    benchmark.patches.set([patch_create(name="shared.diff", content=PATCH)])
    template = _built(benchmark, ref="main", commit=SHA_A, merge_base_with="")
    assert (contract.spec_key(template), contract.settings_digest(template)) == (
        GIT_BUILT_KEY, GIT_BUILT_SETTINGS), template
    (run,) = runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API, ref="main", commit=SHA_A)
    assert (run.kept_spec.sha256, run.kept_spec.settings) == (GIT_BUILT_KEY, GIT_BUILT_SETTINGS)
    assert contract.SCHEMA == 1


# A kept spec as template_like kept it for a confirmation at a commit: its engine without the
# merge base (nor, at a merge base, the commit) that the spec the run is sent has.
LIKE = {**KEPT, "repeats": 9, "engine": {"kind": "git", "repo": REPO, "ref": None, "commit": None}}
LIKE_SPEC_JSON_SHA256 = "7b5cd90e6be9d173fe936edcecaa3d364fd009bf48b32080491068fe6b230af0"


def test_the_spec_json_of_a_run_that_points_at_a_row_kept_by_template_like_is_as_it_was(client):
    benchmark = Benchmark.objects.create(name="b", slug="b", model="/models/other")
    variant = benchmark.variants.create(position=1, name="eager")
    row = KeptSpec.objects.create(sha256=contract.spec_key(LIKE), spec=LIKE, settings=contract.settings_digest(LIKE))
    assert row.settings == KEPT_SETTINGS  # repeats and the engine's ref and commit are no settings
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), ref=SHA_A, commit=SHA_A,
                             kept_spec=row)
    text = client.get(f"/runs/{run.pk}/spec.json").content.decode().replace(f'"run_id": {run.pk}', '"run_id": 0')
    assert hashlib.sha256(text.encode()).hexdigest() == LIKE_SPEC_JSON_SHA256, text
    assert '"merge_base_with": ""' in text
