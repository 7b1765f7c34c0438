"""Alerts: one per change point and subscription, by the subscription's kind: a signed webhook
(httpx), a Slack-format incoming webhook (chat.slack_body) or an email.

The webhook body is JSON; `X-Bench-Signature: sha256=<hex>` is HMAC-SHA256 of the exact body
with the subscription's secret (or BENCH_ALERT_SECRET), as GitHub signs its deliveries."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
from functools import partial

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from benchsite.bench.domain.units import metric_label
from runners import contract

from . import chat
from .models import Alert, ChangePoint, Subscription, Verdict

log = logging.getLogger(__name__)
DELIVER_TASK = "regressions.deliver_alert"


class TransientAlertError(Exception):
    """The receiver could not take the alert now (network, 5xx, 429, mail server): retry later."""


def _link(name: str, *args) -> str:
    return settings.BENCH_PUBLIC_URL + reverse(name, args=args)


def alert_links(cp: ChangePoint) -> dict[str, str]:
    """The pages an alert about CP links to: its run, the benchmark, its changes, the runs around it."""
    links = {"run": _link("bench:run", cp.run_id), "benchmark": _link("bench:benchmark", cp.benchmark.slug),
             "changes": _link("regressions:changes", cp.benchmark.slug)}
    if cp.previous_run_id:
        links["previous_run"] = _link("bench:run", cp.previous_run_id)
    if cp.confirm_run_id:
        links["confirm_run"] = _link("bench:run", cp.confirm_run_id)
    return links


def alert_payload(change_point: ChangePoint) -> dict:
    cp = change_point
    info = contract.METRICS.get(cp.metric)
    incorrect = cp.metric == contract.CORRECT
    # the interval of the change as the first run after it was judged (none for correctness)
    verdict = Verdict.objects.filter(run_id=cp.run_id, metric=cp.metric, point=cp.point).first()
    return {
        "event": "incorrect_output" if incorrect else "regression",
        "change_point": cp.id,
        "benchmark": cp.benchmark.slug,
        "variant": cp.variant.name,
        "series": cp.series_key,
        "metric": cp.metric,
        "label": metric_label(cp.metric),
        "unit": info.unit if info else "",
        "direction": info.direction if info else "",
        "commit": cp.commit,
        "previous_commit": cp.previous_commit,
        "before": cp.before,
        "after": cp.after,
        "change": cp.change,
        "ci_low": verdict.ci_low if verdict else None,
        "ci_high": verdict.ci_high if verdict else None,
        "confirmed_by_run": cp.confirm_run_id,
        "links": alert_links(cp),
    }


def alerts_queue(*, change_point: ChangePoint) -> list[Alert]:
    """An Alert per active subscription of the benchmark, sent once committed; a second call for
    the same change point sends nothing new."""
    created = []
    payload = alert_payload(change_point)
    for subscription in Subscription.objects.filter(benchmark=change_point.benchmark, active=True):
        alert, is_new = Alert.objects.get_or_create(change_point=change_point, subscription=subscription,
                                                    defaults={"payload": payload})
        if is_new:
            created.append(alert)
            transaction.on_commit(partial(_enqueue, alert.id))
    return created


def _enqueue(alert_id: int) -> None:
    from benchsite.celery import app

    try:
        app.send_task(DELIVER_TASK, args=[alert_id], queue=settings.BENCH_WEB_QUEUE)
    except Exception:  # broker down: the alert stays pending and visible
        log.exception("could not queue alert %s", alert_id)


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _post_webhook(alert: Alert) -> None:
    secret = alert.subscription.secret or settings.BENCH_ALERT_SECRET
    if not secret:
        raise ValueError("no signing secret: set the subscription's secret or BENCH_ALERT_SECRET")
    body = json.dumps(alert.payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "decode-bench", "X-Bench-Event": alert.payload["event"],
               "X-Bench-Delivery": str(alert.id), "X-Bench-Signature": sign(body, secret)}
    response = _post(alert.subscription.webhook_url, body, headers)
    if response.status_code >= 400:
        raise ValueError(f"{alert.subscription.webhook_url} refused the alert: "
                         f"HTTP {response.status_code} {response.text[:200]}")


def _post_slack(alert: Alert) -> None:
    """A refusal (4xx: a revoked hook, a bad payload) is retried too, as a chat's hook is often
    fixed in place; after the retries the alert fails with the answer's text (alert_give_up)."""
    body = json.dumps(chat.slack_body(alert.payload)).encode()
    response = _post(alert.subscription.webhook_url, body, {"Content-Type": "application/json",
                                                              "User-Agent": "decode-bench"})
    if response.status_code >= 400:
        raise TransientAlertError(f"{alert.subscription.webhook_url} refused the alert: "
                                  f"HTTP {response.status_code} {response.text[:500]}")


def _post(url: str, body: bytes, headers: dict) -> httpx.Response:
    """POST; a network error, a 5xx or a 429 is transient. Other answers are the caller's to judge."""
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=settings.BENCH_ALERT_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise TransientAlertError(f"{url}: {exc}") from exc
    if response.status_code >= 500 or response.status_code == 429:
        raise TransientAlertError(f"{url}: HTTP {response.status_code} {response.text[:200]}")
    return response


def _send_email(alert: Alert) -> None:
    payload = alert.payload
    lines = [chat.summary(payload), "", *(f"{k}: {v}" for k, v in payload["links"].items())]
    try:
        sender = settings.BENCH_ALERT_FROM_EMAIL or settings.DEFAULT_FROM_EMAIL
        send_mail(chat.summary(payload), "\n".join(lines), sender, [alert.subscription.email])
    except OSError as exc:  # smtplib errors are OSErrors: the mail server may come back
        raise TransientAlertError(f"mail to {alert.subscription.email}: {exc}") from exc


_SENDERS = {Subscription.Kind.WEBHOOK: _post_webhook, Subscription.Kind.SLACK: _post_slack,
            Subscription.Kind.EMAIL: _send_email}


def alert_deliver(*, alert_id: int) -> bool:
    """Send one alert. True when sent (or already sent); False when refused for good (recorded);
    raises TransientAlertError when a retry may succeed (the attempt is recorded)."""
    alert = Alert.objects.select_related("subscription").get(id=alert_id)
    if alert.state == Alert.State.SENT:
        return True
    alert.attempts += 1
    try:
        _SENDERS[alert.subscription.kind](alert)
    except TransientAlertError as exc:
        alert.last_error = str(exc)
        alert.save(update_fields=["attempts", "last_error"])
        raise
    except ValueError as exc:
        alert.state, alert.last_error = Alert.State.FAILED, str(exc)
        alert.save(update_fields=["attempts", "state", "last_error"])
        log.error("alert %s not sent: %s", alert_id, exc)
        return False
    alert.state, alert.sent_at, alert.last_error = Alert.State.SENT, timezone.now(), ""
    alert.save(update_fields=["attempts", "state", "sent_at", "last_error"])
    return True


def alert_give_up(*, alert_id: int, error: str) -> None:
    alert = Alert.objects.get(id=alert_id)
    alert.state, alert.last_error = Alert.State.FAILED, error
    alert.save(update_fields=["state", "last_error"])  # saved, not updated: the metrics count it failed
