"""Branch patterns of a watch: a plain function, no database (a URL's canonical name:
bench/domain/repos.py; a repository's owner and name on GitHub: github/rest.py)."""
import fnmatch


def branch_matches(branch: str, patterns: list[str]) -> bool:
    """fnmatch-style, case-sensitive like git: "perf/*" matches "perf/fused-rmsnorm"."""
    return any(fnmatch.fnmatchcase(branch, pattern) for pattern in patterns)
