"""The retention policy's keep rule for pull requests (bench/retention/protected.py): registered
at start by HooksConfig.ready."""
from .models import PullRequest, PullRun


def open_pull(ids: set[int]) -> set[int]:
    """Of IDS, the head and base runs of an open pull request's comparisons."""
    return set(PullRun.objects.filter(run_id__in=ids, comparison__pull__state=PullRequest.State.OPEN)
               .values_list("run_id", flat=True))


def register_rules() -> None:
    from benchsite.bench.retention.protected import register

    register("open_pull", open_pull)
