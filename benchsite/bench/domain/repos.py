"""A repository's canonical name from any form of its URL: plain functions, no database. An engine
source and a watch of one repository are matched by it."""
import re
from urllib.parse import urlsplit

# user@host:owner/repo(.git), the scp-like form git and GitHub show for ssh.
_SCP = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*)$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~+-]+$")
_REMOTE_SCHEMES = ("https", "http", "ssh", "git")


class RepoURLError(ValueError):
    """Not a repository URL we can name (the message says why)."""


def repo_key(url: str) -> str:
    """The repository's canonical name, `host/owner/name`, lowercase.

    https://github.com/o/r, https://github.com/o/r.git, git@github.com:o/r.git and
    ssh://git@github.com/o/r all give `github.com/o/r`: one repository, one watch, one secret.
    Lowercase because GitHub's and GitLab's names are case-insensitive."""
    return repo_name(url).lower()


def repo_name(url: str) -> str:
    """`host/owner/name` as the URL spells it (`github.com/Codertocat/Hello-World`): the name
    pages show; repo_key is this, lowercased."""
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
    path = path.strip("/")
    if path.lower().endswith(".git"):
        path = path[:-4]
    segments = [s for s in path.split("/") if s]
    if len(segments) < 2 and host != "file" or not segments:
        raise RepoURLError(f"{url!r} names no owner/repository path")
    if any(s in (".", "..") or not _SEGMENT.match(s) for s in segments):
        raise RepoURLError(f"{url!r} has an unexpected path component")
    return f"{host.lower()}/{'/'.join(segments)}"
