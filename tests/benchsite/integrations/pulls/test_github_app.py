"""The GitHub App's authentication: the key (PEM text or @path), the JWT, and the installation
token kept until shortly before it expires."""
import time
from datetime import timedelta

import jwt
import pytest

from benchsite.integrations.github import app as github_app
from benchsite.integrations.forge_api import TransientReportError
from benchsite.integrations.pulls.report import comparison_report

from .conftest import APP_ID, INSTALLATION, INSTALLATION_TOKEN, make_comparison, pem


def test_the_jwt_is_rs256_from_the_app_and_short_lived(github, app_key):
    now = time.time()
    claims = jwt.decode(github_app.app_jwt(now), app_key.public_key(), algorithms=["RS256"])
    assert claims == {"iat": int(now) - 60, "exp": int(now) + 540, "iss": APP_ID}


def test_the_key_from_a_file_or_one_line_of_an_env_file(github, settings, app_key, tmp_path):
    path = tmp_path / "app.pem"
    path.write_text(pem(app_key))
    settings.BENCH_GITHUB_APP_PRIVATE_KEY = f"@{path}"
    assert github_app.app_private_key().public_key().public_numbers() == app_key.public_key().public_numbers()
    settings.BENCH_GITHUB_APP_PRIVATE_KEY = pem(app_key).replace("\n", "\\n")
    assert github_app.app_private_key().private_numbers() == app_key.private_numbers()


@pytest.mark.parametrize("value, says", [
    ("not a key", "not a PEM private key"),
    ("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", "not a PEM private key"),
    ("@/nonexistent/app.pem", "cannot read /nonexistent/app.pem"),
])
def test_a_bad_private_key_says_what_is_wrong(github, settings, db, caplog, value, says):
    settings.BENCH_GITHUB_APP_PRIVATE_KEY = value
    with pytest.raises(github_app.GitHubAppError, match="BENCH_GITHUB_APP_PRIVATE_KEY") as error:
        github_app.app_private_key()
    assert says in str(error.value) and "AAAA" not in str(error.value)
    assert comparison_report(comparison_id=make_comparison().id) is False
    assert says in caplog.text and github.requests == []


def test_the_installation_token_is_kept_across_reports_until_near_its_expiry(github, db):
    first, second = make_comparison(), make_comparison(number=13, repo_url="https://github.com/acme/other")
    comparison_report(comparison_id=first.id)
    comparison_report(comparison_id=second.id)
    assert len(github.calls("POST", "/access_tokens")) == 1
    assert all(r["headers"]["Authorization"] == f"token {INSTALLATION_TOKEN}"
               for r in github.calls("POST", "/check-runs"))
    github_app.forget_tokens()
    github.expires_in = timedelta(seconds=30)  # within the margin: not worth keeping
    for _ in range(2):
        github_app.installation_token("acme", "vllm")
    assert len(github.calls("POST", f"/app/installations/{INSTALLATION}/access_tokens")) == 3


def test_the_app_not_installed_or_github_down(github, db):
    github.fail("GET", "/installation", 404)
    with pytest.raises(github_app.GitHubAppError, match="not installed on acme/vllm"):
        github_app.installation_token("acme", "vllm")
    github.fail("POST", "/access_tokens", 503)
    with pytest.raises(TransientReportError, match="HTTP 503"):
        github_app.installation_token("acme", "vllm")
    assert github_app.installation_token("acme", "vllm") == INSTALLATION_TOKEN
