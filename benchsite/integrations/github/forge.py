"""GitHub as the service sees it (forges.Forge): its webhook deliveries (headers, signature,
pushes; pull-request events in payloads.py), the commit statuses of runs (statuses.py), the
reports of pull-request comparisons (checks.py, as the App of app.py or with a token) and the
issues of confirmed regressions (issues.py)."""
import hashlib
import hmac
from urllib.parse import parse_qs

from django.conf import settings

from benchsite.bench.models import Run

from ..actions import Ignored, Ping, Refused
from ..forge_payloads import branch_push, json_object, url_keys
from ..pulls.events import BENCH_COMMAND
from . import app, checks, payloads, statuses
from .issues import GitHubIssues


class GitHub:
    name = "github"
    secret_headers = ("x-hub-signature", "x-hub-signature-256")

    # --- webhooks/github/ ----------------------------------------------------------------------

    @staticmethod
    def delivery_id(headers) -> str:
        return headers.get("X-GitHub-Delivery", "")[:100]

    @staticmethod
    def event(headers) -> str:
        return headers.get("X-GitHub-Event", "")[:100]

    @staticmethod
    def parse(body: bytes, content_type: str) -> dict:
        if content_type.startswith("application/x-www-form-urlencoded"):
            # GitHub's other content type: the JSON is in the `payload` field.
            payload = parse_qs(body.decode("utf-8", "replace")).get("payload")
            if not payload:
                raise Refused(400, "form-encoded delivery without a `payload` field")
            return json_object(payload[0].encode())
        return json_object(body)

    @staticmethod
    def repo_keys(payload: dict) -> list[str]:
        repo = payload.get("repository")
        if not isinstance(repo, dict):
            return []
        return url_keys(repo.get(k) for k in ("clone_url", "html_url", "ssh_url", "git_url", "svn_url"))

    @staticmethod
    def webhook_secrets(repo_secret: str) -> list[str]:
        """The repository's secret, then the GitHub App's webhook secret: the App's own
        deliveries (check_run) come signed with the latter."""
        return [repo_secret, settings.BENCH_GITHUB_APP_WEBHOOK_SECRET]

    @staticmethod
    def verify(headers, body: bytes, secret: str) -> None:
        given = headers.get("X-Hub-Signature-256", "")
        if not given:
            raise Refused(401, "missing X-Hub-Signature-256: sign deliveries with the repository's secret")
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), given.encode()):
            raise Refused(403, "X-Hub-Signature-256 does not match the body signed with this repository's secret")

    @staticmethod
    def classify(event: str, payload: dict):
        if event == "ping":
            return Ping()
        if (pulls := payloads.github_classify(event, payload)) is not None:
            return pulls
        if event != "push":
            return Ignored(f"event {event!r} is not acted on (only push, ping, pull_request, issue_comment "
                           "and check_run)")
        return branch_push(payload.get("ref"), payload.get("after"), bool(payload.get("deleted")), "after")

    # --- its repositories ----------------------------------------------------------------------

    @staticmethod
    def hosts(repo_key: str) -> bool:
        """A repository on a host in BENCH_GITHUB_HOSTS."""
        return repo_key.split("/", 1)[0] in settings.BENCH_GITHUB_HOSTS

    @staticmethod
    def web_url(repo_key: str, kind: str, ref: str) -> str:
        return f"https://{repo_key}/{kind}/{ref}"

    # --- who may ask, and what is sent back ----------------------------------------------------

    @staticmethod
    def run_status_wanted(run_id: int) -> bool:
        """A token to post with, and a run from a watched GitHub repository at a full SHA."""
        if not settings.BENCH_GITHUB_TOKEN:
            return False
        run = Run.objects.select_related("benchmark__engine_source").get(id=run_id)
        return statuses.run_status_target(run) is not None

    @staticmethod
    def run_status_report(run_id: int) -> bool:
        return statuses.commit_status_report(run_id=run_id)

    @staticmethod
    def bench_comment_refusal(pull, event) -> str:
        """A /bench comment counts from a member, an owner or a collaborator (its author_association)."""
        if event.association not in payloads.MEMBER_ASSOCIATIONS:
            return (f"{BENCH_COMMAND} from {event.actor or '?'} (author_association {event.association or 'NONE'}): "
                    f"only members, owners and collaborators may ask")
        return ""

    @staticmethod
    def collaborator_access(repo_key: str, login: str) -> tuple[str, str]:
        return checks.collaborator_access(repo_key, login)

    @staticmethod
    def comparison_sender():
        """A check run with the App, else a commit status with the token alone (a personal token
        cannot write check runs); the PR comment either way."""
        if app.app_configured():
            return checks.report_with_app, ""
        if settings.BENCH_GITHUB_TOKEN:
            return checks.report_with_token, ""
        return None, "neither a GitHub App (BENCH_GITHUB_APP_ID, BENCH_GITHUB_APP_PRIVATE_KEY) nor BENCH_GITHUB_TOKEN"

    @staticmethod
    def issues_missing() -> str:
        if app.app_configured() or settings.BENCH_GITHUB_TOKEN:
            return ""
        if settings.BENCH_GITHUB_APP_ID:
            return "BENCH_GITHUB_APP_PRIVATE_KEY"
        return "BENCH_GITHUB_TOKEN (or a GitHub App: BENCH_GITHUB_APP_ID and BENCH_GITHUB_APP_PRIVATE_KEY)"

    @staticmethod
    def issues(repo_key: str) -> GitHubIssues:
        return GitHubIssues(repo_key)
