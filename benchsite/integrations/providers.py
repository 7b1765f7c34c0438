"""What GitHub and GitLab send: where the repository, event and delivery id are, how a delivery
is signed, and which pushes are branch pushes. No database here."""
import hashlib
import hmac
import json
import re
from urllib.parse import parse_qs

from .actions import BranchPush, Ignored, Ping, Refused
from .pulls import payloads
from .repos import RepoURLError, repo_key

_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_NULL_SHA = re.compile(r"^0+$")


def _json_object(text: bytes) -> dict:
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Refused(400, "the body is JSON but not an object")
    return data


def _keys(urls) -> list[str]:
    keys = []
    for url in urls:
        if isinstance(url, str) and url:
            try:
                keys.append(repo_key(url))
            except RepoURLError:
                continue
    return list(dict.fromkeys(keys))


def _push(ref, after, deleted: bool, head_sha_name: str):
    """refs/heads/X at a full SHA -> BranchPush; tags and deletions -> Ignored with the reason."""
    if not isinstance(ref, str) or not ref.startswith("refs/"):
        raise Refused(400, f"the push names no ref (got {ref!r})")
    if ref.startswith("refs/tags/"):
        return Ignored(f"tag push {ref.removeprefix('refs/tags/')!r}: tags are not benchmarked, nothing queued")
    if not ref.startswith("refs/heads/"):
        return Ignored(f"push to {ref!r}: not a branch, nothing queued")
    branch = ref.removeprefix("refs/heads/")
    if deleted or (isinstance(after, str) and _NULL_SHA.match(after)):
        return Ignored(f"branch {branch!r} deleted: nothing queued")
    if not isinstance(after, str) or not _SHA.match(after):
        raise Refused(400, f"the push names no full head commit SHA in {head_sha_name!r} (got {after!r})")
    return BranchPush(branch=branch, commit=after)


class GitHub:
    name = "github"
    secret_headers = ("x-hub-signature", "x-hub-signature-256")

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
            return _json_object(payload[0].encode())
        return _json_object(body)

    @staticmethod
    def repo_keys(payload: dict) -> list[str]:
        repo = payload.get("repository")
        if not isinstance(repo, dict):
            return []
        return _keys(repo.get(k) for k in ("clone_url", "html_url", "ssh_url", "git_url", "svn_url"))

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
        return _push(payload.get("ref"), payload.get("after"), bool(payload.get("deleted")), "after")


class GitLab:
    name = "gitlab"
    secret_headers = ("x-gitlab-token",)

    @staticmethod
    def delivery_id(headers) -> str:
        # Idempotency-Key is kept across GitLab's retries; older GitLab sends only the event UUID.
        return (headers.get("Idempotency-Key") or headers.get("X-Gitlab-Event-UUID", ""))[:100]

    @staticmethod
    def event(headers) -> str:
        return headers.get("X-Gitlab-Event", "")[:100]

    @staticmethod
    def parse(body: bytes, content_type: str) -> dict:
        return _json_object(body)

    @staticmethod
    def repo_keys(payload: dict) -> list[str]:
        urls = []
        for section, names in (("project", ("git_http_url", "git_ssh_url", "web_url", "http_url", "ssh_url")),
                               ("repository", ("git_http_url", "git_ssh_url", "homepage", "url"))):
            part = payload.get(section)
            if isinstance(part, dict):
                urls += [part.get(n) for n in names]
        return _keys(urls)

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
        return _push(payload.get("ref"), payload.get("after"), False, "after")


PROVIDERS = {p.name: p for p in (GitHub, GitLab)}
