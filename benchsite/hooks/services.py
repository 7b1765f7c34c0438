"""Writes: webhook deliveries (verify, dedupe, queue, supersede) and API tokens."""
import hashlib
import logging
import os
import secrets
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from benchsite.bench import services as bench_services
from benchsite.bench.models import Run

from .models import ApiToken, RepoWatch, WebhookDelivery
from .providers import BranchPush, Ignored, Ping, Refused

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 5 * 1024 * 1024  # larger deliveries get 413
MAX_STORED_BODY_CHARS = 1_000_000
_SECRET_WORDS = ("signature", "token", "secret", "authorization", "cookie")


@dataclass
class Answer:
    status: int
    detail: str
    runs: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)

    def as_json(self) -> dict:
        data = {"detail": self.detail}
        if self.runs or self.cancelled:
            data.update(runs=self.runs, cancelled=self.cancelled)
        return data


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
    return answer


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
    secret = os.environ.get(watch.secret_env, "")
    if not secret:
        log.error("webhook for %s refused: environment variable %s is not set", watch.repo_key, watch.secret_env)
        raise Refused(403, f"no secret is configured on the server for {watch.repo_key}: refused")
    provider.verify(headers, body, secret)
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


def _act(watch: RepoWatch, delivery: WebhookDelivery, action) -> Answer:
    if isinstance(action, Ping):
        return Answer(200, f"pong: watching {watch.repo_key} branches {watch.branches}")
    if isinstance(action, Ignored):
        return Answer(200, action.reason)
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
            runs += bench_services.runs_trigger(
                benchmark=benchmark, trigger=Run.Trigger.WEBHOOK, commit=push.commit, ref=push.branch
            )
        except bench_services.TriggerError as exc:
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
    return [run.id for run in earlier if bench_services.run_cancel(run=run)]


# --- API tokens ------------------------------------------------------------------------------

TOKEN_PREFIX = "dbt_"


class ApiAuthError(Exception):
    """No valid bearer token (the message says why)."""


def _token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token; the returned text is the only time it exists outside its holder's hands."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, token_sha256=_token_hash(raw), prefix=raw[:10])
    return token, raw


def api_token_authenticate(*, authorization: str) -> ApiToken:
    scheme, _, raw = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiAuthError("send `Authorization: Bearer <token>`")
    token = ApiToken.objects.select_related("user").filter(token_sha256=_token_hash(raw.strip())).first()
    if token is None or token.revoked or not token.user.is_active:
        raise ApiAuthError("invalid or revoked token")
    ApiToken.objects.filter(id=token.id).update(last_used_at=timezone.now())
    return token


def api_tokens_revoke(*, tokens) -> int:
    return tokens.filter(revoked=False).update(revoked=True)
