"""Rate limits: the JSON API per token (per address without one); webhook deliveries that fail
verification per source address. A valid signed delivery is never limited."""
import json
import uuid

import pytest
from django.core.cache import cache

from benchsite.integrations import tokens
from benchsite.integrations.models import WebhookDelivery
from tests.benchsite.integrations.conftest import github_push, sign, watched  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()
    yield
    cache.clear()


def test_api_requests_are_limited_per_token(client, settings, django_user_model):
    settings.BENCH_API_REQUESTS_PER_MIN = 3
    user = django_user_model.objects.create_user("ci", password="x")
    _, first = tokens.api_token_create(user=user, name="a")
    _, second = tokens.api_token_create(user=user, name="b")
    statuses = [client.get("/api/runs/", HTTP_AUTHORIZATION=f"Bearer {first}").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = client.get("/api/runs/", HTTP_AUTHORIZATION=f"Bearer {first}")
    assert limited.status_code == 429 and 1 <= int(limited["Retry-After"]) <= 60
    assert "3 requests a minute for this token" in limited.json()["detail"]
    assert client.get("/api/runs/", HTTP_AUTHORIZATION=f"Bearer {second}").status_code == 200  # its own count
    assert client.get("/api/runs/").status_code == 200  # no token: counted per address


def _deliver(client, body: bytes, signature: str, address: str):
    return client.post("/webhooks/github/", data=body, content_type="application/json", REMOTE_ADDR=address,
                       HTTP_X_GITHUB_EVENT="push", HTTP_X_GITHUB_DELIVERY=str(uuid.uuid4()),
                       HTTP_X_HUB_SIGNATURE_256=signature)


def test_unverified_deliveries_are_limited_per_address_and_signed_ones_never(client, settings, watched, sent):  # noqa: F811
    settings.BENCH_WEBHOOK_REFUSED_PER_MIN = 2
    body = json.dumps(github_push()).encode()
    bad = [_deliver(client, body, "sha256=" + "0" * 64, "203.0.113.9").status_code for _ in range(4)]
    assert bad == [403, 403, 429, 429]
    assert WebhookDelivery.objects.filter(status_code=403).count() == 2  # refusals past the limit are not stored
    assert _deliver(client, body, "sha256=" + "0" * 64, "198.51.100.7").status_code == 403  # another address
    for _ in range(3):  # the limited address, signed: always through
        ok = _deliver(client, body, sign(body), "203.0.113.9")
        assert ok.status_code in (200, 202), ok.content
