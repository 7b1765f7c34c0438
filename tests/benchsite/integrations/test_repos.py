"""Repository URL forms name one repository; branch patterns."""
import pytest

from benchsite.bench.domain.repos import RepoURLError, repo_key, repo_name
from benchsite.integrations.github.rest import owner_and_name
from benchsite.integrations.repos import branch_matches


@pytest.mark.parametrize("url", [
    "https://github.com/vllm-project/vllm",
    "https://github.com/vllm-project/vllm.git",
    "https://github.com/vllm-project/vllm/",
    "https://GitHub.com/vLLM-project/vllm.git",
    "http://github.com/vllm-project/vllm",
    "git@github.com:vllm-project/vllm.git",
    "git@github.com:vllm-project/vllm",
    "ssh://git@github.com/vllm-project/vllm.git",
    "ssh://git@github.com:22/vllm-project/vllm.git",
    "git://github.com/vllm-project/vllm.git",
])
def test_every_url_form_gives_the_same_key(url):
    assert repo_key(url) == "github.com/vllm-project/vllm"


def test_nested_gitlab_groups_and_file_urls():
    assert repo_key("git@gitlab.example.com:team/sub/engine.git") == "gitlab.example.com/team/sub/engine"
    assert repo_key("file:///srv/git/vllm.git") == "file/srv/git/vllm"
    assert owner_and_name("github.com/vllm-project/vllm") == ("vllm-project", "vllm")


@pytest.mark.parametrize("url", ["https://github.com/Codertocat/Hello-World", "git@github.com:Codertocat/Hello-World.git",
                                 "https://GitHub.com/Codertocat/Hello-World.GIT/"])
def test_the_name_keeps_the_case_the_key_drops(url):
    assert repo_name(url) == "github.com/Codertocat/Hello-World"
    assert repo_key(url) == "github.com/codertocat/hello-world"


@pytest.mark.parametrize("url", ["", "vllm", "https://github.com/", "https://github.com/only-owner",
                                 "ftp://github.com/a/b", "https://github.com/a/../b"])
def test_what_is_not_a_repository_url(url):
    with pytest.raises(RepoURLError):
        repo_key(url)


@pytest.mark.parametrize("branch, expected", [
    ("main", True), ("perf/fused-rmsnorm", True), ("perf", False), ("Main", False), ("mainline", False),
])
def test_branch_patterns(branch, expected):
    assert branch_matches(branch, ["main", "perf/*"]) is expected
