"""GitHub's REST API: the headers of every call, and a repository's owner and name in its paths."""
from benchsite.bench.domain.repos import RepoURLError

GITHUB_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                  "User-Agent": "decode-bench"}


def owner_and_name(key: str) -> tuple[str, str]:
    """`github.com/o/r` -> ("o", "r"): the path of GitHub's REST API for a repository."""
    _, _, path = key.partition("/")
    owner, _, name = path.partition("/")
    if not owner or not name or "/" in name:
        raise RepoURLError(f"{key!r} is not host/owner/name")
    return owner, name
