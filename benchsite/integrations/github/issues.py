"""GitHub's issue endpoints: find (by the marker in the body), create, edit, comment, close,
reopen; the same verbs as gitlab/issues.py."""
from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings

from ..forge_api import call
from . import app as github_app
from .rest import GITHUB_HEADERS, owner_and_name


class GitHubIssues:
    """POST /repos/{owner}/{repo}/issues, PATCH .../issues/{number}, POST .../issues/{number}/comments;
    as the App's installation when an App is set up, else with BENCH_GITHUB_TOKEN."""

    def __init__(self, repo_key: str):
        self.owner, self.name = owner_and_name(repo_key)
        self.api = f"{settings.BENCH_GITHUB_API_URL}/repos/{self.owner}/{self.name}/issues"

    def _headers(self) -> dict:
        if github_app.app_configured():
            return github_app.installation_headers(self.owner, self.name)
        return {**GITHUB_HEADERS, "Authorization": f"Bearer {settings.BENCH_GITHUB_TOKEN}"}

    def find(self, label: str, marker: str) -> tuple[int, str] | None:
        query = urlencode({"labels": label, "state": "all", "sort": "created", "direction": "desc", "per_page": 100})
        found = call("GET", f"{self.api}?{query}", headers=self._headers()) or []
        hit = next((i for i in found if "pull_request" not in i and marker in (i.get("body") or "")), None)
        return (int(hit["number"]), hit.get("html_url", "")) if hit else None

    def create(self, title: str, body: str, label: str) -> tuple[int, str]:
        answer = call("POST", self.api, headers=self._headers(), json={"title": title, "body": body, "labels": [label]})
        return int(answer["number"]), answer.get("html_url", "")

    def edit(self, number: int, title: str, body: str) -> None:
        call("PATCH", f"{self.api}/{number}", headers=self._headers(), json={"title": title, "body": body})

    def comment(self, number: int, text: str) -> None:
        call("POST", f"{self.api}/{number}/comments", headers=self._headers(), json={"body": text})

    def close(self, number: int, *, planned: bool) -> None:
        """planned: the change is gone (completed); else it needs no work (not_planned)."""
        reason = "completed" if planned else "not_planned"
        call("PATCH", f"{self.api}/{number}", headers=self._headers(), json={"state": "closed", "state_reason": reason})

    def reopen(self, number: int) -> None:
        call("PATCH", f"{self.api}/{number}", headers=self._headers(),
             json={"state": "open", "state_reason": "reopened"})
