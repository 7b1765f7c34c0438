"""Webhook deliveries: verified, deduplicated, their pushes queued as runs, and the older runs
of a branch superseded. The endpoints are in views.py, each forge's formats in its folder
(github/forge.py, gitlab/forge.py), reached through forges.py."""
import logging
import os

from django.db import IntegrityError, transaction

from benchsite.bench.lifecycle import cancel, trigger
from benchsite.bench.models import Run
from benchsite.metrics.instruments import WEBHOOK_DELIVERIES

from .models import RepoWatch, WebhookDelivery
from .pulls.check_actions import check_action_handle
from .pulls.events import BenchRequest, CheckAction, PullChanged
from .pulls.service import pull_event_handle
from .actions import Answer, BranchPush, Ignored, Ping, Refused

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 5 * 1024 * 1024  # larger deliveries get 413
MAX_STORED_BODY_CHARS = 1_000_000
_SECRET_WORDS = ("signature", "token", "secret", "authorization", "cookie")


def _safe_headers(headers) -> dict:
    """What the admin shows: every header but those that carry a secret or a signature."""
    return {k: v for k, v in headers.items() if not any(word in k.lower() for word in _SECRET_WORDS)}


def _new_delivery(provider, headers, body: bytes) -> WebhookDelivery:
    text = body.decode("utf-8", "replace")
    return WebhookDelivery(
        provider=provider.name, delivery_id=provider.delivery_id(headers), event=provider.event(headers),
        headers=_safe_headers(headers), body=text[:MAX_STORED_BODY_CHARS],
        body_truncated=len(text) > MAX_STORED_BODY_CHARS,
    )


def webhook_refuse_oversize(*, provider, headers, size: int | None) -> Answer:
    delivery = _new_delivery(provider, headers, b"")
    answer = Answer(413, f"body of {size if size is not None else 'more than'} bytes is over the "
                         f"{MAX_BODY_BYTES} byte limit; nothing queued")
    delivery.status_code, delivery.answer = answer.status, answer.detail
    delivery.save()
    _count(provider, delivery)
    return answer


def _count(provider, delivery: WebhookDelivery) -> None:
    status = delivery.status_code or 0
    result = ("accepted" if delivery.accepted else "ignored" if status < 400
              else "refused" if status < 500 else "error")
    WEBHOOK_DELIVERIES.labels(provider=provider.name, result=result).inc()


# Answers to a delivery that could not be verified (bad or missing signature, unknown repository,
# unreadable body): these count against the sender's address (views.webhook).
UNVERIFIED_STATUSES = (400, 401, 403, 404)


def webhook_receive(*, provider, headers, body: bytes, content_type: str = "application/json",
                    store_refused: bool = True) -> Answer:
    """Verify one delivery and act on it. Every delivery is stored with our answer (refusals
    not, when `store_refused` is off: an address over its limit of unverified deliveries)."""
    delivery = _new_delivery(provider, headers, body)
    try:
        answer = _handle(provider, delivery, headers, body, content_type)
    except Refused as refusal:
        answer = Answer(refusal.status, refusal.detail)
    delivery.status_code, delivery.answer = answer.status, answer.detail
    if store_refused or answer.status not in UNVERIFIED_STATUSES:
        delivery.save()
    _count(provider, delivery)
    log.info("%s delivery %s (%s): %s %s", provider.name, delivery.delivery_id, delivery.event, answer.status,
             answer.detail)
    return answer


def _handle(provider, delivery, headers, body, content_type) -> Answer:
    payload = provider.parse(body, content_type)
    keys = provider.repo_keys(payload)
    if not keys:
        raise Refused(400, "the delivery names no repository")
    watch = RepoWatch.objects.filter(repo_key__in=keys).first()
    delivery.repo_key = watch.repo_key if watch else keys[0]
    if watch is None:
        raise Refused(404, f"no watch for repository {keys[0]}: without its secret the delivery cannot be verified")
    delivery.watch = watch
    _verify(provider, watch, headers, body)
    action = provider.classify(delivery.event, payload)
    if isinstance(action, BranchPush):
        delivery.branch, delivery.commit = action.branch, action.commit
    try:
        with transaction.atomic():
            delivery.accepted = True
            delivery.save()  # the unique constraint makes a repeated delivery id fail here
            return _act(watch, delivery, action)
    except IntegrityError:
        delivery.pk, delivery.accepted = None, False
        return Answer(200, f"duplicate delivery {delivery.delivery_id}: already handled, nothing queued")


def _verify(provider, watch: RepoWatch, headers, body: bytes) -> None:
    """Signed with the repository's secret, or with another the forge accepts (GitHub: its App's
    webhook secret, which the App's own deliveries come signed with)."""
    secrets = [secret for secret in provider.webhook_secrets(os.environ.get(watch.secret_env, "")) if secret]
    if not secrets:
        log.error("webhook for %s refused: environment variable %s is not set", watch.repo_key, watch.secret_env)
        raise Refused(403, f"no secret is configured on the server for {watch.repo_key}: refused")
    for i, secret in enumerate(secrets):
        try:
            return provider.verify(headers, body, secret)
        except Refused:
            if i == len(secrets) - 1:
                raise


def _act(watch: RepoWatch, delivery: WebhookDelivery, action) -> Answer:
    if isinstance(action, Ping):
        return Answer(200, f"pong: watching {watch.repo_key} branches {watch.branches}")
    if isinstance(action, Ignored):
        return Answer(200, action.reason)
    if isinstance(action, (PullChanged, BenchRequest)):
        return pull_event_handle(watch=watch, delivery=delivery, event=action)
    if isinstance(action, CheckAction):
        return check_action_handle(watch=watch, delivery=delivery, event=action)
    if not watch.branch_matches(action.branch):
        return Answer(200, f"branch {action.branch!r} matches no watched pattern {watch.branches}: nothing queued")
    return _queue_push(watch, delivery, action)


def _queue_push(watch: RepoWatch, delivery: WebhookDelivery, push: BranchPush) -> Answer:
    # One push of a repository at a time (the caller's transaction holds the lock): two pushes of
    # a branch handled concurrently would each cancel the other's runs and leave none queued.
    RepoWatch.objects.select_for_update().filter(id=watch.id).first()
    runs, skipped = [], []
    for benchmark in watch.benchmarks.order_by("slug"):
        try:
            runs += trigger.runs_trigger(
                benchmark=benchmark, trigger=Run.Trigger.WEBHOOK, commit=push.commit, ref=push.branch,
                branch=push.branch)
        except trigger.TriggerError as exc:
            skipped.append(f"{benchmark.slug}: {exc}")
    delivery.runs.set(runs)
    cancelled = runs_supersede(repo_key=watch.repo_key, branch=push.branch, keep=runs)
    detail = f"queued {len(runs)} run(s) of {push.branch} at {push.commit[:12]}"
    if cancelled:
        detail += f"; cancelled {len(cancelled)} queued run(s) of earlier pushes"
    if skipped:
        detail += "; skipped " + "; ".join(skipped)
    return Answer(202, detail, runs=[r.id for r in runs], cancelled=cancelled)


def runs_supersede(*, repo_key: str, branch: str, keep: list[Run]) -> list[int]:
    """Cancel still-QUEUED runs that earlier pushes of this branch made; nothing else."""
    earlier = (
        Run.objects.filter(
            state=Run.State.QUEUED, webhook_deliveries__repo_key=repo_key, webhook_deliveries__branch=branch,
            webhook_deliveries__accepted=True,
        )
        .exclude(id__in=[r.id for r in keep])
        .distinct()
    )
    return [run.id for run in earlier if cancel.run_cancel(run=run)]
