"""Commit status back to GitHub: which runs get one, what it says, and posting it."""
import logging
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.urls import reverse

from benchsite.bench.models import Measurement, Run
from runners import contract

from .models import RepoWatch
from .repos import RepoURLError, owner_and_name, repo_key

log = logging.getLogger(__name__)
MAX_DESCRIPTION = 140  # GitHub refuses longer descriptions


class TransientStatusError(Exception):
    """GitHub could not take the status now (network, 5xx, rate limit): try again later."""


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


def _decode(run: Run) -> float | None:
    return run.measurements.filter(metric=contract.DECODE_TOK_S).values_list("value", flat=True).first()


def previous_result(run: Run) -> Run | None:
    """The same benchmark and variant's latest earlier success on the same branch (correct output)."""
    return (
        Run.objects.filter(benchmark_id=run.benchmark_id, variant_id=run.variant_id, ref=run.ref,
                           state=Run.State.SUCCEEDED, created_at__lt=run.created_at,
                           measurements__metric=contract.DECODE_TOK_S)
        .exclude(measurements__metric=contract.CORRECT, measurements__value=0)
        .order_by("-created_at", "-id")
        .first()
    )


def _judged_incorrect(run: Run) -> bool:
    return Measurement.objects.filter(run=run, metric=contract.CORRECT, value=0).exists()


def status_description(run: Run) -> tuple[str, str]:
    """(state, description) for GitHub: tok/s and the change against the branch's previous result."""
    prefix = f"{run.variant.name}: "
    if run.state != Run.State.SUCCEEDED:
        reason = (run.error.strip().splitlines() or ["failed"])[0]
        return "failure", (prefix + "failed: " + reason)[:MAX_DESCRIPTION]
    tok_s = _decode(run)
    figure = f"{tok_s:.1f} tok/s" if tok_s is not None else "no decode figure"
    if _judged_incorrect(run):
        return "failure", (prefix + f"output incorrect ({figure})")[:MAX_DESCRIPTION]
    before = previous_result(run)
    if tok_s is None or before is None:
        change = f"no earlier result on {run.ref}" if run.ref else "first result"
    else:
        old = _decode(before)
        change = f"{(tok_s - old) / old * 100:+.1f}% vs {old:.1f} at {before.commit[:7] or 'run ' + str(before.id)}"
    return "success", (prefix + f"{figure}, {change}")[:MAX_DESCRIPTION]


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
        raise TransientStatusError(f"{url}: {exc}") from exc
    if response.status_code >= 500 or response.status_code == 429:
        raise TransientStatusError(f"{url}: HTTP {response.status_code} {response.text[:200]}")
    if response.status_code >= 400:
        log.error("commit status of run %s refused by %s: HTTP %s %s", run_id, url, response.status_code,
                  response.text[:500])
        return False
    log.info("commit status of run %s reported to %s", run_id, url)
    return True
