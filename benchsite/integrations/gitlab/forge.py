"""GitLab as the service sees it (forges.Forge): its webhook deliveries (headers, token, pushes;
merge-request and note events in payloads.py), the reports of merge-request comparisons
(reports.py) and the issues of confirmed regressions (issues.py). Runs get no commit status here,
and no check run has buttons."""
import hmac
from urllib.parse import urlsplit

from django.conf import settings

from ..actions import Ignored, Refused
from ..forge_api import ReportRefused
from ..forge_payloads import branch_push, json_object, url_keys
from ..pulls.events import BENCH_COMMAND
from . import payloads, reports
from .issues import GitLabIssues


class GitLab:
    name = "gitlab"
    secret_headers = ("x-gitlab-token",)

    # --- webhooks/gitlab/ ----------------------------------------------------------------------

    @staticmethod
    def delivery_id(headers) -> str:
        # Idempotency-Key is kept across GitLab's retries; older GitLab sends only the event UUID.
        return (headers.get("Idempotency-Key") or headers.get("X-Gitlab-Event-UUID", ""))[:100]

    @staticmethod
    def event(headers) -> str:
        return headers.get("X-Gitlab-Event", "")[:100]

    @staticmethod
    def parse(body: bytes, content_type: str) -> dict:
        return json_object(body)

    @staticmethod
    def repo_keys(payload: dict) -> list[str]:
        urls = []
        for section, names in (("project", ("git_http_url", "git_ssh_url", "web_url", "http_url", "ssh_url")),
                               ("repository", ("git_http_url", "git_ssh_url", "homepage", "url"))):
            part = payload.get(section)
            if isinstance(part, dict):
                urls += [part.get(n) for n in names]
        return url_keys(urls)

    @staticmethod
    def webhook_secrets(repo_secret: str) -> list[str]:
        return [repo_secret]

    @staticmethod
    def verify(headers, body: bytes, secret: str) -> None:
        given = headers.get("X-Gitlab-Token", "")
        if not given:
            raise Refused(401, "missing X-Gitlab-Token: set the webhook's secret token")
        if not hmac.compare_digest(given.encode(), secret.encode()):
            raise Refused(403, "X-Gitlab-Token does not match this repository's secret")

    @staticmethod
    def classify(event: str, payload: dict):
        if event == "Tag Push Hook" or payload.get("object_kind") == "tag_push":
            return Ignored("tag push: tags are not benchmarked, nothing queued")
        if (pulls := payloads.gitlab_classify(event, payload)) is not None:
            return pulls
        if event != "Push Hook":
            return Ignored(f"event {event!r} is not acted on (only Push Hook, Merge Request Hook and Note Hook)")
        return branch_push(payload.get("ref"), payload.get("after"), False, "after")

    # --- its repositories ----------------------------------------------------------------------

    @staticmethod
    def hosts(repo_key: str) -> bool:
        """A repository on BENCH_GITLAB_API_URL's host, or on one named gitlab.*."""
        host = repo_key.split("/", 1)[0]
        return host == urlsplit(settings.BENCH_GITLAB_API_URL).hostname or host.startswith("gitlab.")

    @staticmethod
    def web_url(repo_key: str, kind: str, ref: str) -> str:
        return f"https://{repo_key}/-/{kind}/{ref}"

    # --- who may ask, and what is sent back ----------------------------------------------------

    @staticmethod
    def run_status_wanted(run_id: int) -> bool:
        return False

    @staticmethod
    def run_status_report(run_id: int) -> bool:
        return False

    @staticmethod
    def bench_comment_refusal(pull, event) -> str:
        """A note does not say its author's role: one on a merge request from a fork starts nothing."""
        if pull.is_fork:
            return f"{BENCH_COMMAND} on a merge request from a fork: a maintainer adds the watch's label instead"
        return ""

    @staticmethod
    def collaborator_access(repo_key: str, login: str) -> tuple[str, str]:
        raise ReportRefused("GitLab has no check-run buttons: nobody's access is asked there")

    @staticmethod
    def comparison_sender():
        """A commit status on the head and the merge request's one note, with BENCH_GITLAB_TOKEN."""
        return (reports.report, "") if settings.BENCH_GITLAB_TOKEN else (None, "BENCH_GITLAB_TOKEN is not set")

    @staticmethod
    def issues_missing() -> str:
        return "" if settings.BENCH_GITLAB_TOKEN else "BENCH_GITLAB_TOKEN"

    @staticmethod
    def issues(repo_key: str) -> GitLabIssues:
        return GitLabIssues(repo_key)
