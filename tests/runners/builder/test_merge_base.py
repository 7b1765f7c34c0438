"""The base side of a pull request measures the merge base of its head and the base branch,
resolved by the worker's mirror at the time it runs, not the branch's tip."""
import pytest

from runners.builder.errors import BuildFailure
from runners.builder.git import Git, Mirror
from runners.contract import EngineSourceSpec, SpecError

from .conftest import Remote


def test_the_merge_base_is_where_the_pr_branched_off_not_the_moved_tip(tmp_path):
    remote = Remote(tmp_path)
    first = remote.commit({"a.py": "A = 1\n"}, "one")
    fork_point = remote.commit({"a.py": "A = 2\n"}, "two")
    head = remote.commit({"b.py": "B = 1\n"}, "the PR", branch="perf/fuse")
    remote.reset_to(fork_point)
    tip = remote.commit({"c.py": "C = 1\n"}, "main moves on")  # after the PR was opened
    log: list[str] = []
    mirror = Mirror(remote.url, tmp_path / "cache", Git(allow_file=True, timeout_s=60, log=log))
    assert mirror.merge_base(head, "main") == fork_point
    assert mirror.merge_base(head, "refs/heads/main") == fork_point
    assert fork_point not in (first, tip, head)
    with pytest.raises(BuildFailure, match="not found"):
        mirror.merge_base(head, "no-such-branch")


def test_a_merge_base_needs_a_git_source_and_a_valid_branch():
    with pytest.raises(SpecError):
        EngineSourceSpec(kind="installed", merge_base_with="main")
    with pytest.raises(SpecError):
        EngineSourceSpec(kind="git", repo="https://github.com/a/b", ref="1" * 40, merge_base_with="-x --upload-pack=y")
    spec = EngineSourceSpec(kind="git", repo="https://github.com/a/b", ref="1" * 40, merge_base_with="main")
    assert spec.merge_base_with == "main"
