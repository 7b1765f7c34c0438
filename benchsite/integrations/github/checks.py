"""A comparison reported to GitHub: a check run with the App, or a commit status with a token
alone (a personal token cannot write check runs), and the one PR comment."""
from __future__ import annotations

from urllib.parse import quote

from django.conf import settings

from ..forge_api import call
from ..pulls import wording
from ..pulls.check_buttons import check_buttons
from ..pulls.ledger import keep_one_comment, send_once
from ..pulls.markdown import comparison_markdown, pr_page_url
from . import app as github_app
from .rest import GITHUB_HEADERS, owner_and_name

MAX_DESCRIPTION = 140   # GitHub refuses longer status descriptions
MAX_SUMMARY = 65_535    # and longer check-run summaries
# A commit status has no neutral: as the statuses of pushes, an inconclusive result is no pass and
# an unjudged one no failure; a run that did not finish, or was cancelled, is an error.
GITHUB_STATES = {"passed": "success", "improved": "success", "not_judged": "success", "regressed": "failure",
                 "incorrect": "failure", "inconclusive": "failure", "failed": "error"}


def _repo_api(comparison) -> str:
    owner, name = owner_and_name(comparison.pull.repo_key)
    return f"{settings.BENCH_GITHUB_API_URL}/repos/{owner}/{name}"


def check_run_payload(comparison) -> dict:
    """What the check run says now: its status (and conclusion once completed), a title, and
    the table once done."""
    payload = {"name": comparison.check_name, "details_url": pr_page_url(comparison.pull),
               "external_id": str(comparison.id)}
    state = comparison.state
    if state in wording.CHECK_STATUS:
        payload["status"] = wording.CHECK_STATUS[state]
    else:
        payload.update(status="completed", conclusion=wording.check_conclusion(comparison))
    payload["actions"] = check_buttons(comparison)  # always sent: an empty list takes old buttons away
    if state == "waiting":
        summary = f"{wording.waiting_text(comparison)}\n\n[Details]({payload['details_url']})"
    elif state == "cancelled":
        summary = f"{wording.cancelled_text(comparison)}.\n\n[Details]({payload['details_url']})"
    else:
        summary = comparison_markdown([comparison])
    payload["output"] = {"title": wording.check_title(comparison), "summary": summary[:MAX_SUMMARY]}
    return payload


def collaborator_access(repo_key: str, login: str) -> tuple[str, str]:
    """LOGIN's (role, permission) on the repository, as GitHub's permission API answers: the role
    by name (admin, maintain, write, triage, read, none, or a custom role's), and the permission
    it grants (admin, write, read or none: maintain counts as write). Raises forge_api's errors."""
    owner, name = owner_and_name(repo_key)
    answer = call("GET", f"{settings.BENCH_GITHUB_API_URL}/repos/{owner}/{name}/collaborators/{quote(login)}"
                         "/permission", headers=github_app.installation_headers(owner, name)) or {}
    permission = answer.get("permission") or "none"
    return answer.get("role_name") or permission, permission


def _app_headers(comparison) -> dict:
    return github_app.installation_headers(*owner_and_name(comparison.pull.repo_key))


def _existing_check_run(api: str, headers: dict, comparison) -> str:
    """The id of the check run this comparison already has on GitHub ('' when none): its id may
    be lost (an answer that never came back, a stale save of the comparison)."""
    url = f"{api}/commits/{comparison.head_sha}/check-runs?check_name={quote(comparison.check_name)}&filter=all"
    runs = (call("GET", url, headers=headers) or {}).get("check_runs", [])
    return next((str(run["id"]) for run in runs if run.get("external_id") == str(comparison.id)), "")


def _send_check_run(comparison, payload: dict) -> None:
    api, headers = _repo_api(comparison), _app_headers(comparison)
    comparison.check_run_id = comparison.check_run_id or _existing_check_run(api, headers, comparison)
    if comparison.check_run_id:
        call("PATCH", f"{api}/check-runs/{comparison.check_run_id}", headers=headers, json=payload)
    else:
        answer = call("POST", f"{api}/check-runs", headers=headers, json={**payload, "head_sha": comparison.head_sha})
        comparison.check_run_id = str(answer["id"])


def status_payload(comparison) -> dict:
    if comparison.state in ("waiting", "queued", "running"):
        state = "pending"
    elif comparison.state == "cancelled":
        state = "error"
    else:
        state = GITHUB_STATES.get(comparison.outcome, "error")
    return {"state": state, "context": comparison.check_name[:255], "target_url": pr_page_url(comparison.pull),
            "description": wording.one_line(comparison)[:MAX_DESCRIPTION]}


def _token_headers() -> dict:
    return {**GITHUB_HEADERS, "Authorization": f"Bearer {settings.BENCH_GITHUB_TOKEN}"}


def _send_status(comparison, payload: dict) -> None:
    call("POST", f"{_repo_api(comparison)}/statuses/{comparison.head_sha}", headers=_token_headers(), json=payload)


def _keep_comment(comparison, headers) -> None:
    api = _repo_api(comparison)
    keep_one_comment(comparison.id, field="comment_id", post_url=f"{api}/issues/{comparison.pull.number}/comments",
                     edit_url=lambda id_: f"{api}/issues/comments/{id_}", edit_method="PATCH", headers=headers)


def report_with_app(comparison) -> None:
    """The comparison's check run; the PR comment too when the watch asks for one."""
    send_once(comparison.id, "check", check_run_payload, _send_check_run)
    if wording.comment_wanted(comparison):
        _keep_comment(comparison, lambda: _app_headers(comparison))


def report_with_token(comparison) -> None:
    """Without an App: a commit status on the head, and always the PR comment (a status has no
    room for the table)."""
    send_once(comparison.id, "status", status_payload, _send_status)
    _keep_comment(comparison, _token_headers)
