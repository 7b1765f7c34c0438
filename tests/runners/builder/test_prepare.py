"""runners.builder.prepare on real git repositories: a ref resolved to a full SHA, a Python-only
commit laid over the installed vLLM, a csrc change refused, the build cache, patches."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runners.builder.cache import BuildCache
from runners.builder.errors import BuildFailure
from runners.builder.prepare import prepare_engine
from runners.contract import JobSpec, SpecError

from .conftest import BASE_TAG, installed_vllm

LOGGER = "vllm/logger.py"


def job(remote=None, ref="", patches=(), commit=""):
    engine = {"kind": "git", "repo": remote.url, "ref": ref, "commit": commit} if remote else {}
    return JobSpec.from_dict({"model": "m", "prompt": "p", "max_tokens": 4, "repeats": 1, "engine": engine,
                              "patches": [{"name": n, "content": c} for n, c in patches]})


def with_marker(remote, value: str) -> dict:
    text = (installed_vllm() / "logger.py").read_text()
    return {LOGGER: text + f"\nBENCH_MARK = {value!r}\n"}


def run_python(pythonpath: str, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_python_only_commit_is_resolved_and_overlaid(fresh_main, build_config):
    sha = fresh_main.commit(with_marker(fresh_main, "from-main"), "python only")
    prepared = prepare_engine(job(fresh_main, ref="main"), build_config)
    assert prepared.info["path"] == "overlay"
    assert prepared.info["commit"] == sha and prepared.info["ref"] == "main"
    assert prepared.info["base_commit"] == fresh_main.base
    assert prepared.info["engine_version"] == "0.32.0"
    tree = Path(prepared.pythonpath)
    assert not (tree / LOGGER).is_symlink()  # the commit's file, a real copy
    assert (tree / "vllm/config/__init__.py").is_symlink()  # everything else is the install
    assert (tree / "vllm/_C.abi3.so").resolve() == (installed_vllm() / "_C.abi3.so").resolve()
    out = run_python(prepared.pythonpath, "import importlib.util, runpy; "
                     "print(runpy.run_path(importlib.util.find_spec('vllm').submodule_search_locations[0]"
                     " + '/logger.py', run_name='x')['BENCH_MARK'])")
    assert out == "from-main"
    assert "1 package file(s) changed, 0 compiled" in prepared.log


def test_the_base_tag_runs_the_installed_engine_with_its_commit(vllm_remote, build_config):
    prepared = prepare_engine(job(vllm_remote, ref=BASE_TAG), build_config)
    assert prepared.info["path"] == "installed" and prepared.pythonpath == ""
    assert prepared.info["commit"] == vllm_remote.base


def test_the_worker_reports_each_commit_s_lineage_and_a_branch_ref_s_branch(fresh_main, build_config):
    """The web side has no git: the worker tells the commit's first parent, its depth along first
    parents, and the branch when the ref asked for is one (a tag or a commit is none)."""
    first = fresh_main.commit(with_marker(fresh_main, "one"), "one")
    second = fresh_main.commit(with_marker(fresh_main, "two"), "two")
    feature = fresh_main.commit(with_marker(fresh_main, "f"), "feature", branch="perf/x")

    def lineage(**asked):
        info = prepare_engine(job(fresh_main, **asked), build_config).info
        return info["commit"], info.get("branch"), info["parent"], info["first_parent_depth"]

    assert lineage(ref="main") == (second, "main", first, 3)
    assert lineage(ref="perf/x") == (feature, "perf/x", second, 4)
    assert lineage(ref="perf/x", commit=feature) == (feature, "perf/x", second, 4)  # a push
    assert lineage(ref=first[:10]) == (first, None, fresh_main.base, 2)
    assert lineage(ref=BASE_TAG) == (fresh_main.base, None, "", 1)


def test_compiled_change_without_a_source_build_is_refused_with_the_reason(fresh_main, build_config):
    sha = fresh_main.commit({"csrc/cpu/fast.cpp": "int f() { return 1; }\n"}, "csrc change")
    with pytest.raises(BuildFailure) as err:
        prepare_engine(job(fresh_main, ref=sha[:10]), build_config)
    assert err.value.kind == "build"
    assert "changes compiled sources (csrc/cpu/fast.cpp)" in str(err.value)
    assert "BENCH_SOURCE_BUILD_COMMAND" in str(err.value)
    assert err.value.commit == sha  # the ref (a prefix) resolved: the run page shows the commit it refused
    assert not any(BuildCache(build_config.cache_dir, 1).entries())


def test_build_cache_hit_then_lru_eviction(fresh_main, build_config, tmp_path):
    first = fresh_main.commit(with_marker(fresh_main, "one"), "one")
    miss = prepare_engine(job(fresh_main, commit=first), build_config)
    hit = prepare_engine(job(fresh_main, commit=first), build_config)
    assert (miss.info["cache_hit"], hit.info["cache_hit"]) == (False, True)
    assert hit.pythonpath == miss.pythonpath and "build cache hit" in hit.log
    # A bound smaller than two overlays: building a second commit evicts the first (least recent).
    cache = BuildCache(build_config.cache_dir, 1)
    from dataclasses import replace
    small = replace(build_config, cache_max_bytes=1)
    second = fresh_main.commit(with_marker(fresh_main, "two"), "two")
    built = prepare_engine(job(fresh_main, commit=second), small)
    assert [d for _, d in cache.entries()] == [Path(built.pythonpath).parent]
    assert not Path(miss.pythonpath).exists()
    assert "evicted from the build cache" in built.log


@pytest.mark.parametrize("ref", ["-uupload-pack=touch", "main..x", "a b", "x.lock", "--all"])
def test_invalid_refs_are_refused_before_git_runs(vllm_remote, ref):
    with pytest.raises(SpecError, match="invalid ref"):
        job(vllm_remote, ref=ref)


@pytest.mark.parametrize("url", ["ext::sh -c touch% /tmp/x", "-oProxyCommand=x", "http://example.com/r.git",
                                 "https://example.com/../r", "file:///tmp/r.git"])
def test_invalid_urls_are_refused_before_git_runs(build_config, tmp_path, url):
    from dataclasses import replace
    spec = JobSpec.from_dict({"model": "m", "prompt": "p", "max_tokens": 4, "repeats": 1,
                              "engine": {"kind": "git", "repo": url, "ref": "main"}})
    with pytest.raises(BuildFailure, match="URL") as err:
        prepare_engine(spec, replace(build_config, allow_file_urls=False))
    assert "$ git" not in err.value.log
    assert not (build_config.cache_dir / "git").exists()


def test_mirror_is_cloned_once_then_fetched(fresh_main, build_config):
    prepare_engine(job(fresh_main, ref=BASE_TAG), build_config)
    newer = fresh_main.commit(with_marker(fresh_main, "later"), "later")
    prepared = prepare_engine(job(fresh_main, ref="main"), build_config)
    assert prepared.info["commit"] == newer  # the branch moved: fetched, not cloned again
    assert "clone --mirror" not in prepared.log and "fetch --prune" in prepared.log


REJECTED = f"""--- a/{LOGGER}
+++ b/{LOGGER}
@@ -1,3 +1,3 @@
 this line is not in the file
-nor is this one
+replacement that cannot land
 context
"""


def test_patch_that_does_not_apply_fails_with_its_rejected_hunk(fresh_main, build_config):
    sha = fresh_main.commit(with_marker(fresh_main, "p"), "for the patch")
    for spec in (job(fresh_main, commit=sha, patches=[("bad.patch", REJECTED)]),
                 job(None, patches=[("bad.patch", REJECTED)])):
        with pytest.raises(BuildFailure) as err:
            prepare_engine(spec, build_config)
        assert err.value.kind == "patch"
        assert "patch 'bad.patch' does not apply" in str(err.value)
        assert f"{LOGGER} hunk #1:\n@@ -1,3 +1,3 @@\n this line is not in the file" in str(err.value)
    assert not any(BuildCache(build_config.cache_dir, 1).entries())


def test_patch_on_top_of_a_commit(fresh_main, build_config):
    sha = fresh_main.commit(with_marker(fresh_main, "before"), "to patch")
    patch = (f"--- a/{LOGGER}\n+++ b/{LOGGER}\n@@ -{_last_line(fresh_main)},1 +{_last_line(fresh_main)},1 @@\n"
             f"-BENCH_MARK = 'before'\n+BENCH_MARK = 'patched'\n")
    prepared = prepare_engine(job(fresh_main, commit=sha, patches=[("p.patch", patch)]), build_config)
    assert prepared.info["patches"] == [JobSpec.from_dict(
        {"model": "m", "prompt": "p", "max_tokens": 1, "repeats": 1,
         "patches": [{"name": "p", "content": patch}]}).patches[0].sha256]
    assert (Path(prepared.pythonpath) / LOGGER).read_text().endswith("BENCH_MARK = 'patched'\n")
    assert (installed_vllm() / "logger.py").read_text().count("BENCH_MARK") == 0  # the install is untouched


def _last_line(remote) -> int:
    return len((remote.work / LOGGER).read_text().splitlines())
