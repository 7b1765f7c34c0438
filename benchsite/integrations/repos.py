"""Repository names and branch patterns: plain functions, no database."""
import fnmatch
import re
from urllib.parse import urlsplit

# user@host:owner/repo(.git), the scp-like form git and GitHub show for ssh.
_SCP = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*)$")
_SEGMENT = re.compile(r"^[a-z0-9._~+-]+$")
_REMOTE_SCHEMES = ("https", "http", "ssh", "git")


class RepoURLError(ValueError):
    """Not a repository URL we can name (the message says why)."""


def repo_key(url: str) -> str:
    """The repository's canonical name, `host/owner/name`, lowercase.

    https://github.com/o/r, https://github.com/o/r.git, git@github.com:o/r.git and
    ssh://git@github.com/o/r all give `github.com/o/r`: one repository, one watch, one secret."""
    text = (url or "").strip()
    if not text or len(text) > 500:
        raise RepoURLError("repository URL is empty or longer than 500 characters")
    scp = _SCP.match(text) if "://" not in text else None
    if scp:
        host, path = scp["host"], scp["path"]
    else:
        parts = urlsplit(text)
        if parts.scheme == "file":
            host, path = "file", parts.path
        elif parts.scheme in _REMOTE_SCHEMES and parts.hostname:
            host, path = parts.hostname, parts.path
        else:
            raise RepoURLError(f"{url!r} is not a repository URL (https://host/owner/repo, git@host:owner/repo.git)")
    segments = [s for s in path.lower().strip("/").removesuffix(".git").split("/") if s]
    if len(segments) < 2 and host != "file" or not segments:
        raise RepoURLError(f"{url!r} names no owner/repository path")
    if any(s in (".", "..") or not _SEGMENT.match(s) for s in segments):
        raise RepoURLError(f"{url!r} has an unexpected path component")
    return f"{host.lower()}/{'/'.join(segments)}"


def owner_and_name(key: str) -> tuple[str, str]:
    """`github.com/o/r` -> ("o", "r"): the path of GitHub's REST API for a repository."""
    _, _, path = key.partition("/")
    owner, _, name = path.partition("/")
    if not owner or not name or "/" in name:
        raise RepoURLError(f"{key!r} is not host/owner/name")
    return owner, name


def branch_matches(branch: str, patterns: list[str]) -> bool:
    """fnmatch-style, case-sensitive like git: "perf/*" matches "perf/fused-rmsnorm"."""
    return any(fnmatch.fnmatchcase(branch, pattern) for pattern in patterns)
