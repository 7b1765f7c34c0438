"""The job spec's shapes, all made by the contract: the template a run is kept with (its own
values null), its key and settings digest, and the spec it is sent (the template filled in,
in today's shape). The service validates a job once, when it makes the template; the worker
once, when it reads what it is sent; nothing in between."""
import json

import pytest

from runners import contract
from runners.contract import JobSpec, RunOwn, SpecError, patch_entry, patch_sha256

REPO = "https://github.com/acme/vllm.git"
SHA_A, SHA_B = "a" * 40, "b" * 40
BENCHMARK = {"model": "/models/m", "prompt": "Hi", "max_tokens": 16, "repeats": 3, "engine_args": ["--max-model-len", "512"],
             "engine_env": {"X": "1"}, "workloads": [{"max_tokens": 16}, {"concurrency": 4, "max_tokens": 8}],
             "packages": ["vllm-gguf-plugin==0.0.5"]}
VARIANT = {"flags": ["--enforce-eager"], "env": {"Y": "2"}}
SOURCE = {"kind": "git", "repo": REPO, "default_ref": "main"}
PATCH = patch_entry("p.diff", "+x\n", patch_sha256("+x\n"), "benchmark")
UPLOAD = patch_entry("mine.diff", "+y\n", patch_sha256("+y\n"), "run")
RUNS = {
    "installed": (None, RunOwn(run_id=7)),
    "a commit": (SOURCE, RunOwn(run_id=7, ref="main", commit=SHA_A, patches=(UPLOAD,))),
    "the default ref": (SOURCE, RunOwn(run_id=7)),
    "a merge base": (SOURCE, RunOwn(run_id=7, ref=SHA_B, merge_base_with="main")),
}


def _wire(value):
    return json.loads(json.dumps(value))  # as the database and the broker give it back


def _template(name: str, **changes) -> dict:
    source, run = RUNS[name]
    return contract.spec_template({**BENCHMARK, **changes}, VARIANT, source=source, run=run, patches=[PATCH])


@pytest.mark.parametrize("name", RUNS)
def test_the_sent_spec_is_the_template_filled_in_and_what_validating_it_gives_back(name):
    template = _template(name)
    sent = contract.spec_sent(_wire(template), RUNS[name][1])
    validated = JobSpec.from_dict(_wire(sent)).to_dict()
    assert validated == sent and list(validated) == list(sent) and list(validated["engine"]) == list(sent["engine"])
    assert (template["run_id"], sent["run_id"]) == (None, 7)
    assert template["patches"] == [PATCH] and sent["patches"] == [PATCH, *RUNS[name][1].patches]


def test_a_template_leaves_what_the_run_holds_itself_null():
    engine = {name: _template(name)["engine"] for name in RUNS}
    assert engine["a commit"] == {"kind": "git", "repo": REPO, "ref": None, "commit": None, "merge_base_with": ""}
    assert engine["the default ref"] == {"kind": "git", "repo": REPO, "ref": "main", "commit": "", "merge_base_with": ""}
    assert engine["a merge base"] == {"kind": "git", "repo": REPO, "ref": None, "commit": "", "merge_base_with": None}
    assert engine["installed"] == {"kind": "installed", "repo": "", "ref": "", "commit": "", "merge_base_with": ""}


def test_the_sent_spec_is_not_validated_again(monkeypatch):
    template = _template("a commit")
    monkeypatch.setattr(JobSpec, "from_dict", classmethod(lambda cls, data: pytest.fail("validated again")))
    assert contract.spec_sent(template, RUNS["a commit"][1])["run_id"] == 7


def test_a_template_is_validated_whole_with_the_runs_own_patches():
    big = patch_entry("big.diff", "+" * (contract.MAX_PATCH_BYTES + 1), "", "run")
    with pytest.raises(SpecError, match="big.diff"):
        contract.spec_template(BENCHMARK, VARIANT, source=SOURCE, run=RunOwn(ref="main", patches=(big,)))
    with pytest.raises(SpecError, match="needs a ref or a commit"):
        contract.spec_template(BENCHMARK, VARIANT, source={**SOURCE, "default_ref": ""}, run=RunOwn())
    with pytest.raises(SpecError, match="unknown probe"):
        contract.spec_template({**BENCHMARK, "probes": ["no_such_probe"]}, VARIANT, source=None, run=RunOwn())


def test_template_like_keeps_the_settings_and_takes_the_runs_commit_and_is_validated():
    kept = _wire(_template("a commit"))
    run = RunOwn(run_id=8, ref=SHA_B, commit=SHA_B)
    like = contract.template_like(kept, default_ref="release", run=run, repeats=9)
    assert contract.settings_digest(like) == contract.settings_digest(kept) and like["repeats"] == 9
    sent = contract.spec_sent(_wire(like), run)
    assert sent["engine"] == {"kind": "git", "repo": REPO, "ref": SHA_B, "commit": SHA_B, "merge_base_with": ""}
    assert JobSpec.from_dict(_wire(sent)).to_dict() == sent
    with pytest.raises(SpecError, match="unknown probe"):
        contract.template_like({**kept, "probes": ["no_such_probe"]}, default_ref="", run=run)


def test_an_older_kept_template_is_sent_in_todays_shape():
    """template_like kept a git engine without the field it does not use; a template of an
    older checkout may lack a field added since (the default point, no packages)."""
    older = _wire(_template("a commit"))
    older["engine"] = {"kind": "git", "repo": REPO, "ref": None, "commit": None}
    del older["packages"], older["workloads"]
    sent = contract.spec_sent(older, RUNS["a commit"][1])
    assert sent == JobSpec.from_dict(_wire(sent)).to_dict()
    assert sent["engine"]["merge_base_with"] == "" and sent["packages"] == []
    assert sent["workloads"] == [{"concurrency": 1, "max_tokens": 16}]


def test_what_counts_as_a_setting_is_the_contracts():
    base = _template("a commit")
    digest = contract.settings_digest(base)
    same = [{"run_id": 3}, {"repeats": 11}, {"startup_timeout_s": 60}, {"schema": 0},
            {"engine": {**base["engine"], "ref": "dev", "commit": SHA_B}}]
    for change in same:
        assert contract.settings_digest({**base, **change}) == digest, change
    other = [{"max_tokens": 17}, {"engine_args": []}, {"engine_env": {}}, {"packages": []}, {"probes": ["decode"]},
             {"workloads": []}, {"engine": {**base["engine"], "repo": "https://github.com/other/vllm.git"}},
             {"patches": [{**PATCH, "sha256": "0" * 64}]}]
    for change in other:
        assert contract.settings_digest({**base, **change}) != digest, change
    assert contract.spec_key(base) != contract.spec_key({**base, "repeats": 11})
    assert "repeats" not in contract.BENCHMARK_SETTINGS and "max_tokens" in contract.BENCHMARK_SETTINGS
