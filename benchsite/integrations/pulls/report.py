"""Report a comparison back where its pull request lives, through its forge (forges.py): GitHub (a
check run with the App, else a commit status) plus one PR comment, or GitLab (a commit status plus
one merge-request note)."""
from __future__ import annotations

import logging

from ..forge_api import ReportRefused, TransientReportError
from ..forges import FORGES
from .markdown import comparison_markdown, pr_page_url
from .models import Comparison

__all__ = ["TransientReportError", "comparison_markdown", "comparison_report", "pr_page_url"]
log = logging.getLogger(__name__)


def _sender(comparison: Comparison):
    """The function that reports COMPARISON, or (None, why not)."""
    provider = comparison.pull.provider
    if provider not in FORGES:
        return None, f"unknown provider {provider!r}"
    return FORGES[provider].comparison_sender()


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
