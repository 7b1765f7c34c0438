"""The counters of webhook deliveries, forge calls, commit statuses and alerts, by result."""
from types import SimpleNamespace

import httpx
import pytest

from benchsite.integrations import forge_api as forge
from benchsite.metrics import instruments, receivers


def _count(counter, **labels) -> float:
    return counter.labels(**labels)._value.get()


@pytest.mark.django_db
def test_webhook_deliveries_by_result(client):
    before = _count(instruments.WEBHOOK_DELIVERIES, provider="github", result="refused")
    answer = client.post("/webhooks/github/", data=b"{}", content_type="application/json",
                         HTTP_X_GITHUB_EVENT="push", HTTP_X_GITHUB_DELIVERY="d-1")
    assert 400 <= answer.status_code < 500
    assert _count(instruments.WEBHOOK_DELIVERIES, provider="github", result="refused") == before + 1


@pytest.mark.parametrize("status, headers, result, raised", [
    (200, {}, "ok", None),
    (422, {}, "refused", forge.ReportRefused),
    (503, {}, "retry", forge.TransientReportError),
    (403, {"x-ratelimit-remaining": "0"}, "retry", forge.TransientReportError),
])
def test_forge_calls_by_result(monkeypatch, settings, status, headers, result, raised):
    monkeypatch.setattr(httpx, "request", lambda *a, **k: httpx.Response(status, headers=headers, json={}))
    before = _count(instruments.FORGE_REPORTS, result=result)
    if raised:
        with pytest.raises(raised):
            forge.call("POST", "https://api.github.invalid/x", headers={})
    else:
        forge.call("POST", "https://api.github.invalid/x", headers={})
    assert _count(instruments.FORGE_REPORTS, result=result) == before + 1


def test_a_network_failure_is_a_retry(monkeypatch):
    def unreachable(*a, **k):
        raise httpx.ConnectError("refused")

    monkeypatch.setattr(httpx, "request", unreachable)
    before = _count(instruments.FORGE_REPORTS, result="retry")
    with pytest.raises(forge.TransientReportError):
        forge.call("GET", "https://api.github.invalid/x", headers={})
    assert _count(instruments.FORGE_REPORTS, result="retry") == before + 1


def test_http_result_words():
    assert [instruments.http_result(s) for s in (201, 404, 429, 502)] == ["ok", "refused", "retry", "retry"]


def test_alert_attempts_by_result():
    """regressions/alerts.py saves `attempts` with each try: with `state` when it ended."""
    def saved(update_fields, state="pending", created=False):
        receivers._alert_saved(None, SimpleNamespace(state=state), created, update_fields=update_fields)

    before = {r: _count(instruments.ALERTS, result=r) for r in ("sent", "retry", "failed")}
    saved(["attempts", "state", "sent_at", "last_error"], state="sent")
    saved(["attempts", "last_error"])
    saved(["attempts", "state", "last_error"], state="failed")
    saved(None, created=True)  # a new alert is no attempt
    saved(["payload"])
    assert {r: _count(instruments.ALERTS, result=r) - before[r] for r in before} == {"sent": 1, "retry": 1, "failed": 1}



def test_the_alert_receiver_is_connected():
    """Connected at start (MetricsConfig.ready) to the regressions app's Alert, by its label."""
    from django.db.models.signals import post_save

    from benchsite.regressions.models import Alert

    before = _count(instruments.ALERTS, result="sent")
    post_save.send(sender=Alert, instance=SimpleNamespace(state="sent"), created=False,
                   update_fields=frozenset({"attempts", "state", "sent_at", "last_error"}), raw=False, using="default")
    assert _count(instruments.ALERTS, result="sent") == before + 1
