"""Whether a watched repository's issues can be written: on a forge (forges.forge_of_repo) that
has what the service needs to write them."""
from __future__ import annotations

from ..forges import forge_of_repo


def issues_refusal(repo_key: str) -> str:
    """Why a watch of REPO_KEY cannot have `issues: true` here; '' when it can."""
    forge = forge_of_repo(repo_key)
    if forge is None:
        return (f"{repo_key} is on neither a GitHub host (BENCH_GITHUB_HOSTS) nor GitLab's "
                "(BENCH_GITLAB_API_URL): no issues can be opened there")
    missing = forge.issues_missing()
    return f"issues: true needs {missing}, which is not set" if missing else ""
