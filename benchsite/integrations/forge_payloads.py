"""What every forge's deliveries share: a JSON object for a body, the repository keys their URLs
name, and which pushes are branch pushes. Pure, no database; each forge's own reading is in its
folder (github/forge.py, gitlab/forge.py)."""
import json
import re

from .actions import BranchPush, Ignored, Refused
from benchsite.bench.domain.repos import RepoURLError, repo_key

FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256
_NULL_SHA = re.compile(r"^0+$")


def json_object(text: bytes) -> dict:
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Refused(400, "the body is JSON but not an object")
    return data


def url_keys(urls) -> list[str]:
    keys = []
    for url in urls:
        if isinstance(url, str) and url:
            try:
                keys.append(repo_key(url))
            except RepoURLError:
                continue
    return list(dict.fromkeys(keys))


def branch_push(ref, after, deleted: bool, head_sha_name: str):
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
    if not isinstance(after, str) or not FULL_SHA.match(after):
        raise Refused(400, f"the push names no full head commit SHA in {head_sha_name!r} (got {after!r})")
    return BranchPush(branch=branch, commit=after)
