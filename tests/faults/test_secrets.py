"""Secrets never land in logs, pages, artifacts or the admin: plant them (a webhook secret, an
API token, a GitHub token in the workers' environment), run a whole run through the real
workers and a signed webhook delivery, then grep every output for them."""
import json
import uuid

import pytest
from django.apps import apps
from django.core import serializers
from django.test import Client

from benchsite.integrations import tokens
from benchsite.integrations.models import RepoWatch, WebhookDelivery
from tests.benchsite.integrations.conftest import sign

from .conftest import _service
from .harness import restore_app

# Production infrastructure (private Redis, real workers): `make test` runs them in the PostgreSQL pass.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_pass, pytest.mark.timeout(150)]

WEBHOOK_SECRET = f"planted-webhook-{uuid.uuid4().hex}"
GITHUB_TOKEN = f"ghp_planted{uuid.uuid4().hex}"


@pytest.fixture
def planted(tmp_path, transactional_db, monkeypatch):
    monkeypatch.setenv("BENCH_PLANTED_WEBHOOK_SECRET", WEBHOOK_SECRET)
    svc, saved = _service(tmp_path, transactional_db, extra_env={
        "BENCH_GITHUB_TOKEN": GITHUB_TOKEN, "BENCH_PLANTED_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "FAKE_ENGINE_ENV_DUMP": str(tmp_path / "engine-env.json")})
    svc.workers.start_service()
    yield svc
    svc.workers.stop()
    restore_app(saved)
    svc.redis.kill()


def _everything_stored() -> str:
    return "".join(serializers.serialize("json", model.objects.all()) for model in apps.get_models())


def test_planted_secrets_appear_in_no_log_page_artifact_or_admin_page(planted, django_user_model):
    svc = planted
    staff = django_user_model.objects.create_user("root", password="pw", is_staff=True, is_superuser=True)
    _, api_token = tokens.api_token_create(user=staff, name="ci")
    watch = RepoWatch.objects.create(repo_url="https://github.com/acme/engine", branches=["main"],
                                     secret_env="BENCH_PLANTED_WEBHOOK_SECRET")
    watch.benchmarks.set([svc.benchmark])
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1,
                       "repository": {"full_name": "acme/engine", "html_url": "https://github.com/acme/engine"}}).encode()
    anonymous = Client()
    answer = anonymous.post("/webhooks/github/", data=body, content_type="application/json",
                            HTTP_X_GITHUB_EVENT="ping", HTTP_X_GITHUB_DELIVERY=str(uuid.uuid4()),
                            HTTP_X_HUB_SIGNATURE_256=sign(body, WEBHOOK_SECRET))
    assert answer.status_code == 200, answer.content
    assert anonymous.get("/api/runs/", HTTP_AUTHORIZATION=f"Bearer {api_token}").status_code == 200
    run = svc.trigger("ok")
    done, _ = svc.wait_final(run.id, 60)
    assert done.state == "SUCCEEDED", done.error

    admin = Client()
    admin.force_login(staff)
    delivery = WebhookDelivery.objects.get()
    pages = [anonymous.get(p).content.decode() for p in ("/", f"/runs/{run.id}/", "/b/faults/", "/api/runs/",
                                                          f"/runs/{run.id}/spec.json")]
    pages += [admin.get(p).content.decode() for p in (
        "/admin/hooks/webhookdelivery/", f"/admin/hooks/webhookdelivery/{delivery.id}/change/",
        "/admin/hooks/apitoken/", "/admin/hooks/repowatch/", f"/admin/bench/run/{run.id}/change/")]
    pages += [anonymous.get(f"/runs/{run.id}/artifacts/{a.id}/").getvalue().decode(errors="replace")
              for a in done.artifacts.all()]
    files = [p.read_text(errors="replace") for p in svc.workers.log_dir.rglob("*")
             if p.is_file() and p.suffix in (".log", ".json", "")]
    outputs = {"pages": "\n".join(pages), "files": "\n".join(files), "database": _everything_stored()}
    assert len(outputs["files"]) > 1000 and "SUCCEEDED" in outputs["pages"]  # the grep saw real outputs
    for name, text in outputs.items():
        for secret in (WEBHOOK_SECRET, GITHUB_TOKEN, api_token):
            assert secret not in text, f"a planted secret ({secret[:12]}...) is in the {name}"
    # The engine (a process that may run code from outside) got none of the worker's secrets.
    engine_env = json.loads((svc.workers.log_dir / "engine-env.json").read_text())
    assert engine_env["PATH"] and engine_env["FAKE_ENGINE_ENV_DUMP"]
    leaked = [k for k in engine_env if k.startswith(("BENCH_", "CELERY_", "DJANGO_")) or k == "DATABASE_URL"]
    assert leaked == [], f"the engine's environment holds the worker's {leaked}"
