"""`issues: true` on a watch: applied idempotently where the forge's credentials are set, refused
by bench_apply with the missing variable's name where they are not, and written nowhere then."""
import io
import textwrap

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchsite.integrations.models import RepoWatch

pytestmark = pytest.mark.django_db

FILE = """\
benchmarks:
  - slug: tiny
    name: Tiny
    model: var/tiny-model
    engine: {{repo: {repo}}}
watches:
  - repo: {repo}
    branches: [main]
    benchmarks: [tiny]
    secret_env: BENCH_SECRET_VLLM
    issues: {issues}
"""
GITHUB, GITLAB = "https://github.com/acme/vllm", "https://gitlab.com/group/name"


@pytest.fixture
def no_forge(settings):
    settings.BENCH_GITHUB_TOKEN = settings.BENCH_GITHUB_APP_ID = settings.BENCH_GITHUB_APP_PRIVATE_KEY = ""
    settings.BENCH_GITLAB_TOKEN = ""
    return settings


def apply(tmp_path, repo, issues) -> str:
    path = tmp_path / "bench.yaml"
    path.write_text(textwrap.dedent(FILE.format(repo=repo, issues=issues)))
    out = io.StringIO()
    call_command("bench_apply", str(path), stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.parametrize("repo, missing", [
    (GITHUB, "issues: true needs BENCH_GITHUB_TOKEN (or a GitHub App: BENCH_GITHUB_APP_ID and "
             "BENCH_GITHUB_APP_PRIVATE_KEY), which is not set"),
    (GITLAB, "issues: true needs BENCH_GITLAB_TOKEN, which is not set"),
])
def test_issues_without_the_forges_credentials_are_refused_naming_the_variable(no_forge, tmp_path, repo, missing):
    with pytest.raises(CommandError) as info:
        apply(tmp_path, repo, "true")
    assert missing in str(info.value) and "watches[0]" in str(info.value)
    assert not RepoWatch.objects.exists()


def test_an_app_without_its_key_names_the_key(no_forge, tmp_path):
    no_forge.BENCH_GITHUB_APP_ID = "4242"
    with pytest.raises(CommandError, match="needs BENCH_GITHUB_APP_PRIVATE_KEY, which is not set"):
        apply(tmp_path, GITHUB, "true")


def test_a_repository_on_no_known_forge_and_a_value_not_true_or_false(no_forge, tmp_path):
    no_forge.BENCH_GITHUB_TOKEN = "t"
    with pytest.raises(CommandError, match="neither a GitHub host .BENCH_GITHUB_HOSTS. nor GitLab's"):
        apply(tmp_path, "https://git.example.org/acme/vllm", "true")
    with pytest.raises(CommandError, match="issues must be true or false"):
        apply(tmp_path, GITHUB, "yes please")


@pytest.mark.parametrize("repo, variable", [(GITHUB, "BENCH_GITHUB_TOKEN"), (GITLAB, "BENCH_GITLAB_TOKEN")])
def test_applied_with_credentials_idempotently_and_turned_off(no_forge, tmp_path, repo, variable):
    setattr(no_forge, variable, "a-token")
    assert "create watch" in apply(tmp_path, repo, "true")
    assert RepoWatch.objects.get().issues is True
    assert "no changes" in apply(tmp_path, repo, "true")
    assert "issues: True -> False" in apply(tmp_path, repo, "false")
    setattr(no_forge, variable, "")  # off needs no credentials
    assert "no changes" in apply(tmp_path, repo, "false")


def test_the_admin_refuses_it_too(no_forge):
    from django.core.exceptions import ValidationError

    watch = RepoWatch(repo_url=GITLAB, branches=["main"], secret_env="S", issues=True)
    with pytest.raises(ValidationError, match="issues: true needs BENCH_GITLAB_TOKEN"):
        watch.full_clean()
    no_forge.BENCH_GITLAB_TOKEN = "a-token"
    watch.full_clean()
