"""The forges' registry: each forge answers every call of the Forge protocol, by its name and by
its repositories' hosts."""
import pytest

from benchsite.integrations.forges import FORGES, Forge, forge_for, forge_of_repo


def protocol_members() -> set[str]:
    names = {name for name in vars(Forge) if not name.startswith("_")}
    return names | set(Forge.__annotations__)


@pytest.mark.parametrize("name", sorted(FORGES))
def test_each_forge_has_every_member_of_the_protocol(name):
    forge = forge_for(name)
    assert forge.name == name
    assert {member for member in protocol_members() if not hasattr(forge, member)} == set()


def test_a_repository_belongs_to_the_forge_of_its_host(settings):
    settings.BENCH_GITHUB_HOSTS = ["github.com", "github.example.org"]
    settings.BENCH_GITLAB_API_URL = "https://code.example.org/api/v4"
    assert forge_of_repo("github.example.org/acme/vllm").name == "github"
    assert forge_of_repo("code.example.org/group/sub/vllm").name == "gitlab"
    assert forge_of_repo("gitlab.com/group/vllm").name == "gitlab"
    assert forge_of_repo("example.org/acme/vllm") is None
    with pytest.raises(KeyError):
        forge_for("bitbucket")


def test_links_to_a_commit_take_each_forges_form():
    assert forge_for("github").web_url("github.com/acme/vllm", "commit", "abc") == "https://github.com/acme/vllm/commit/abc"
    assert forge_for("gitlab").web_url("gitlab.com/g/vllm", "commit", "abc") == "https://gitlab.com/g/vllm/-/commit/abc"
