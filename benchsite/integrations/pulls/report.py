"""Report a comparison back where its pull request lives: GitHub (a check run with the App, else
a commit status) plus one PR comment, or GitLab (a commit status plus one merge-request note)."""
from __future__ import annotations

import logging

from django.conf import settings

from . import github_app, github_report, gitlab_report
from .client import ReportRefused, TransientReportError
from .markdown import comparison_markdown, pr_page_url
from .models import Comparison

__all__ = ["TransientReportError", "comparison_markdown", "comparison_report", "pr_page_url"]
log = logging.getLogger(__name__)


def _sender(comparison: Comparison):
    """The function that reports COMPARISON, or (None, why not)."""
    provider = comparison.pull.provider
    if provider == "gitlab":
        return (gitlab_report.report, "") if settings.BENCH_GITLAB_TOKEN else (None, "BENCH_GITLAB_TOKEN is not set")
    if provider != "github":
        return None, f"unknown provider {provider!r}"
    if github_app.app_configured():
        return github_report.report_with_app, ""
    if settings.BENCH_GITHUB_TOKEN:
        return github_report.report_with_token, ""
    return None, "neither a GitHub App (BENCH_GITHUB_APP_ID, BENCH_GITHUB_APP_PRIVATE_KEY) nor BENCH_GITHUB_TOKEN"


def comparison_report(*, comparison_id: int) -> bool:
    """Send the comparison's state where its PR belongs. Raises TransientReportError when a retry
    may succeed; False when nothing is set up to report with, or the forge refused it for good
    (logged); True when reported (or already reported as it is)."""
    comparison = Comparison.objects.select_related("pull__watch", "benchmark").get(id=comparison_id)
    send, why_not = _sender(comparison)
    if send is None:
        log.info("comparison %s (%s) not reported: %s", comparison_id, comparison.pull, why_not)
        return False
    try:
        send(comparison)
    except ReportRefused as exc:
        log.error("comparison %s (%s) not reported: %s", comparison_id, comparison.pull, exc)
        return False
    log.info("comparison %s (%s %s) reported", comparison_id, comparison.pull, comparison.state)
    return True
