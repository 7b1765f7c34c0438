"""GitLab's issue endpoints: find (by the marker in the body), create, edit, comment, close,
reopen; the same verbs as github/issues.py."""
from __future__ import annotations

from urllib.parse import quote, urlencode

from django.conf import settings

from ..forge_api import call


class GitLabIssues:
    """POST /projects/:id/issues, PUT /projects/:id/issues/:iid (state_event close or reopen),
    POST /projects/:id/issues/:iid/notes; with BENCH_GITLAB_TOKEN."""

    def __init__(self, repo_key: str):
        path = repo_key.split("/", 1)[1]
        self.api = f"{settings.BENCH_GITLAB_API_URL}/projects/{quote(path, safe='')}/issues"

    def _headers(self) -> dict:
        return {"PRIVATE-TOKEN": settings.BENCH_GITLAB_TOKEN, "User-Agent": "decode-bench"}

    def find(self, label: str, marker: str) -> tuple[int, str] | None:
        words = marker.removeprefix("<!--").removesuffix("-->").strip()  # GitLab searches words
        query = urlencode({"labels": label, "search": words, "in": "description", "per_page": 100})
        found = call("GET", f"{self.api}?{query}", headers=self._headers()) or []
        hit = next((i for i in found if marker in (i.get("description") or "")), None)
        return (int(hit["iid"]), hit.get("web_url", "")) if hit else None

    def create(self, title: str, body: str, label: str) -> tuple[int, str]:
        answer = call("POST", self.api, headers=self._headers(), json={"title": title, "description": body,
                                                                       "labels": label})
        return int(answer["iid"]), answer.get("web_url", "")

    def edit(self, number: int, title: str, body: str) -> None:
        call("PUT", f"{self.api}/{number}", headers=self._headers(), json={"title": title, "description": body})

    def comment(self, number: int, text: str) -> None:
        call("POST", f"{self.api}/{number}/notes", headers=self._headers(), json={"body": text})

    def close(self, number: int, *, planned: bool) -> None:
        call("PUT", f"{self.api}/{number}", headers=self._headers(), json={"state_event": "close"})

    def reopen(self, number: int) -> None:
        call("PUT", f"{self.api}/{number}", headers=self._headers(), json={"state_event": "reopen"})
