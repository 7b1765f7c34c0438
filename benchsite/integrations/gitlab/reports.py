"""A comparison reported to GitLab: a commit status on the head and the merge request's one note."""
from __future__ import annotations

from urllib.parse import quote

from django.conf import settings

from ..forge_api import ReportRefused, call
from ..pulls import wording
from ..pulls.ledger import keep_one_comment, send_once
from ..pulls.markdown import pr_page_url

MAX_DESCRIPTION = 255
# A commit status has no neutral: as the statuses of pushes, an inconclusive result is no pass and
# an unjudged one no failure; a run that did not finish is a failure (GitLab's states have no error).
GITLAB_STATES = {"passed": "success", "improved": "success", "not_judged": "success", "regressed": "failed",
                 "incorrect": "failed", "inconclusive": "failed", "failed": "failed"}


def project_api(pull) -> str:
    """gitlab.com/group/sub/name -> {api}/projects/group%2Fsub%2Fname."""
    path = pull.repo_key.split("/", 1)[1]
    return f"{settings.BENCH_GITLAB_API_URL}/projects/{quote(path, safe='')}"


def _headers() -> dict:
    return {"PRIVATE-TOKEN": settings.BENCH_GITLAB_TOKEN, "User-Agent": "decode-bench"}


def status_payload(comparison) -> dict:
    state = comparison.state
    if state in ("waiting", "queued"):
        word = "pending"
    elif state == "running":
        word = "running"
    elif state == "cancelled":
        word = "canceled"
    else:
        word = GITLAB_STATES.get(comparison.outcome, "failed")
    return {"state": word, "name": comparison.check_name, "target_url": pr_page_url(comparison.pull),
            "description": wording.one_line(comparison)[:MAX_DESCRIPTION]}


def _send_status(comparison, payload: dict) -> None:
    try:
        call("POST", f"{project_api(comparison.pull)}/statuses/{comparison.head_sha}", headers=_headers(), json=payload)
    except ReportRefused as exc:
        if "cannot transition status" not in str(exc).lower():
            raise
        # already in this state (what was sent is forgotten, e.g. a stale save): nothing to change


def report(comparison) -> None:
    # Keyed by the state alone: GitLab refuses a status in the state it already has (waiting and
    # queued are both pending), so a new description alone is not sent.
    send_once(comparison.id, "status", status_payload, _send_status, same=lambda payload: payload["state"])
    api = f"{project_api(comparison.pull)}/merge_requests/{comparison.pull.number}/notes"
    keep_one_comment(comparison.id, field="note_id", post_url=api, edit_url=lambda id_: f"{api}/{id_}",
                     edit_method="PUT", headers=_headers)
