"""Production settings (DJANGO_DEBUG=0): `manage.py check --deploy` is clean, HTTPS only,
HSTS, secure cookies. Settings are read at start-up, so each check is a fresh process."""
import json
import os
import secrets
import subprocess
import sys

from tests.conftest import ROOT

PROBE = """
import json, django
django.setup()
from django.test import Client
from django.conf import settings
http = Client().get("/accounts/login/")
https = Client().get("/accounts/login/", secure=True)
print(json.dumps({"http": [http.status_code, http.get("Location", "")],
                  "https": https.status_code, "hsts": https.get("Strict-Transport-Security", ""),
                  "frame": https.get("X-Frame-Options", ""),
                  "csrf_cookie_secure": https.cookies["csrftoken"]["secure"] if "csrftoken" in https.cookies else None,
                  "session_cookie_secure": settings.SESSION_COOKIE_SECURE}))
"""


def _production_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "BENCH_PRIVATE"))}
    env.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=secrets.token_urlsafe(60), DJANGO_ALLOWED_HOSTS="testserver",
               DJANGO_SETTINGS_MODULE="benchsite.settings", **extra)
    return env


def test_check_deploy_is_clean_with_debug_off():
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          env=_production_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_production_redirects_to_https_and_sends_hsts_and_secure_cookies():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=_production_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["http"] == [301, "https://testserver/accounts/login/"]
    assert seen["https"] == 200
    assert seen["hsts"] == "max-age=31536000; includeSubDomains"
    assert seen["frame"] == "DENY"
    assert seen["csrf_cookie_secure"] is True and seen["session_cookie_secure"] is True


def test_debug_off_without_a_secret_key_refuses_to_start():
    env = _production_env()
    del env["DJANGO_SECRET_KEY"]
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "DJANGO_SECRET_KEY must be set" in done.stderr
