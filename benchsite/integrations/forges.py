"""The forges the service talks to, one folder each (github/, gitlab/), and the one interface the
rest of the code calls them through: `forge_for(provider)` for a delivery, a pull request or an
issue that names its forge, `forge_of_repo(repo_key)` for a repository that does not."""
from __future__ import annotations

from typing import Callable, Protocol

from .github.forge import GitHub
from .gitlab.forge import GitLab


class IssueTracker(Protocol):
    """A repository's issues (github/issues.py, gitlab/issues.py); each call raises forge_api's errors."""

    def find(self, label: str, marker: str) -> tuple[int, str] | None: ...
    def create(self, title: str, body: str, label: str) -> tuple[int, str]: ...
    def edit(self, number: int, title: str, body: str) -> None: ...
    def comment(self, number: int, text: str) -> None: ...
    def close(self, number: int, *, planned: bool) -> None: ...
    def reopen(self, number: int) -> None: ...


class Forge(Protocol):
    name: str  # the provider: webhooks/<name>/, WebhookDelivery.provider, PullRequest.provider
    secret_headers: tuple[str, ...]

    # A delivery to webhooks/<name>/ (webhooks.py): read, verified, classified as actions.py's
    # Ping, Ignored or BranchPush, or pulls/events.py's PullChanged, BenchRequest or CheckAction.
    def delivery_id(self, headers) -> str: ...
    def event(self, headers) -> str: ...
    def parse(self, body: bytes, content_type: str) -> dict: ...
    def repo_keys(self, payload: dict) -> list[str]: ...
    def webhook_secrets(self, repo_secret: str) -> list[str]: ...
    def verify(self, headers, body: bytes, secret: str) -> None: ...  # raises actions.Refused
    def classify(self, event: str, payload: dict): ...

    # Its repositories
    def hosts(self, repo_key: str) -> bool: ...
    def web_url(self, repo_key: str, kind: str, ref: str) -> str: ...  # kind: commit, compare...

    # Who may ask: a /bench comment's refusal ('' when it counts; pulls/service.py), a check run
    # button's presser's (role, permission) (pulls/check_actions.py)
    def bench_comment_refusal(self, pull, event) -> str: ...
    def collaborator_access(self, repo_key: str, login: str) -> tuple[str, str]: ...

    # What is sent back: a run's commit status (tasks.py), a comparison (pulls/report.py), issues (issues/)
    def run_status_wanted(self, run_id: int) -> bool: ...
    def run_status_report(self, run_id: int) -> bool: ...  # raises forge_api.TransientStatusError
    def comparison_sender(self) -> tuple[Callable | None, str]: ...  # (send, '') or (None, why not)
    def issues_missing(self) -> str: ...  # the variable(s) to set before issues can be written; '' when set
    def issues(self, repo_key: str) -> IssueTracker: ...


FORGES: dict[str, Forge] = {forge.name: forge for forge in (GitHub(), GitLab())}


def forge_for(provider: str) -> Forge:
    """The forge named PROVIDER (github, gitlab); KeyError for any other."""
    return FORGES[provider]


def forge_of_repo(repo_key: str) -> Forge | None:
    """The forge whose host REPO_KEY is on (GitHub's hosts first), None for any other host."""
    return next((forge for forge in FORGES.values() if forge.hosts(repo_key)), None)
