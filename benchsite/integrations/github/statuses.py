"""A run's commit status back to GitHub: which runs get one, what it says, and posting it."""
import logging
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.urls import reverse

from benchsite.bench.lifecycle import outcome
from benchsite.bench.models import Run
from benchsite.bench.domain.repos import RepoURLError, repo_key
from benchsite.bench.domain.units import verdict_text
from benchsite.metrics.instruments import COMMIT_STATUSES, http_result
from benchsite.regressions.models import ChangePoint
from benchsite.regressions.outcomes import run_facts
from benchsite.regressions.detect.sensitivity import short_percent
from runners import contract

from ..forge_api import TransientStatusError
from ..models import RepoWatch
from .rest import owner_and_name

log = logging.getLogger(__name__)
MAX_DESCRIPTION = 140  # GitHub refuses longer descriptions


@dataclass(frozen=True)
class StatusTarget:
    owner: str
    name: str
    sha: str


def run_status_target(run: Run) -> StatusTarget | None:
    """Where the run's status goes: only runs from a watched GitHub repository at a full SHA."""
    if run.trigger not in (Run.Trigger.WEBHOOK, Run.Trigger.API) or not contract.is_full_sha(run.commit):
        return None
    delivery = run.webhook_deliveries.exclude(repo_key="").first()
    key = delivery.repo_key if delivery else None
    source = run.benchmark.engine_source
    if key is None and source is not None and source.repo_url:
        try:
            key = repo_key(source.repo_url)
        except RepoURLError:
            return None
    if key is None or key.split("/", 1)[0] not in settings.BENCH_GITHUB_HOSTS:
        return None
    if not RepoWatch.objects.filter(repo_key=key).exists():
        return None
    owner, name = owner_and_name(key)
    return StatusTarget(owner=owner, name=name, sha=run.commit)


# GitHub's state for each outcome: success only for a run that was judged and did not get worse
# (or could not be judged yet), pending until it and its confirmations are done.
STATUS_STATES = {
    outcome.PENDING: "pending",
    outcome.INCORRECT: "failure", outcome.REGRESSED: "failure", outcome.FAILED: "failure",
    outcome.INCONCLUSIVE: "failure",  # not shown to be within the threshold: no pass
    outcome.PASSED: "success", outcome.IMPROVED: "success", outcome.NOT_JUDGED: "success",
}


def _verdict_text(v: outcome.VerdictFact) -> str:
    threshold = f", threshold {short_percent(v.threshold)}" if v.threshold else ""
    return verdict_text(v.metric, v.effect, v.ci_low, v.ci_high) + threshold


def _why(run: Run, word: str) -> str:
    if word == outcome.FAILED:
        return (run.error.strip().splitlines() or [run.state.lower()])[0]
    if word == outcome.PENDING and not run.is_final:
        return run.state.lower()
    if word == outcome.INCORRECT:
        details = run.measurements.filter(metric=contract.CORRECT).values_list("details", flat=True).first() or {}
        return details.get("reason") or "greedy output differs from the reference"
    if word == outcome.PENDING:
        confirm = (ChangePoint.objects.filter(run=run, confirmation=ChangePoint.Confirmation.PENDING)
                   .values_list("confirm_run_id", flat=True).first())
        return f"confirmation run #{confirm} queued" if confirm else "a confirmation run is due"
    verdict = outcome.deciding_verdict(run_facts(run), word, prefer=contract.DECODE_TOK_S)
    if verdict is not None:
        return _verdict_text(verdict)
    if word == outcome.NOT_JUDGED:
        note = run.verdicts.filter(metric=contract.DECODE_TOK_S, point="").values_list("note", flat=True).first()
        return note or "no verdict"
    return "confirmed by a re-run" if word == outcome.REGRESSED else ""


def status_description(run: Run) -> tuple[str, str]:
    """(state, description) for GitHub: the run's outcome and what decided it (the verdict and
    its interval, the reason of a failure or of an incorrect output)."""
    word = run.outcome
    why = _why(run, word)
    text = f"{run.variant.name}: {word.replace('_', ' ')}" + (f": {why}" if why else "")
    return STATUS_STATES[word], text[:MAX_DESCRIPTION]


def status_payload(run: Run) -> dict:
    state, description = status_description(run)
    return {
        "state": state,
        "description": description,
        "context": f"{settings.BENCH_STATUS_CONTEXT}/{run.benchmark.slug}/{run.variant.name}"[:255],
        "target_url": settings.BENCH_PUBLIC_URL + reverse("bench:run", args=[run.id]),
    }


def commit_status_report(*, run_id: int) -> bool:
    """Post the run's status. Raises TransientStatusError when a retry may succeed; False when
    there is nothing to report or GitHub refused it for good (logged)."""
    run = Run.objects.select_related("benchmark__engine_source", "variant").get(id=run_id)
    target = run_status_target(run)
    if target is None or not settings.BENCH_GITHUB_TOKEN:
        return False
    url = f"{settings.BENCH_GITHUB_API_URL}/repos/{target.owner}/{target.name}/statuses/{target.sha}"
    headers = {"Authorization": f"Bearer {settings.BENCH_GITHUB_TOKEN}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "decode-bench"}
    try:
        response = httpx.post(url, json=status_payload(run), headers=headers, timeout=settings.BENCH_STATUS_TIMEOUT_S)
    except httpx.HTTPError as exc:
        COMMIT_STATUSES.labels(result="retry").inc()
        raise TransientStatusError(f"{url}: {exc}") from exc
    COMMIT_STATUSES.labels(result=http_result(response.status_code)).inc()
    if response.status_code >= 500 or response.status_code == 429:
        raise TransientStatusError(f"{url}: HTTP {response.status_code} {response.text[:200]}")
    if response.status_code >= 400:
        log.error("commit status of run %s refused by %s: HTTP %s %s", run_id, url, response.status_code,
                  response.text[:500])
        return False
    log.info("commit status of run %s reported to %s", run_id, url)
    return True
