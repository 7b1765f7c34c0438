"""GitLab: a merge request's commit status and one note."""
from .fields import Group, Url, env


class GitLab(Group):
    title = "GitLab"
    about = "Merge requests get a commit status and one note, with this token, at this API."

    token: str = env("BENCH_GITLAB_TOKEN", "", "a GitLab token for merge requests' statuses and notes; "
                     "empty: no reports", repr=False)
    api_url: Url = env("BENCH_GITLAB_API_URL", "https://gitlab.com/api/v4", "GitLab's REST API")
