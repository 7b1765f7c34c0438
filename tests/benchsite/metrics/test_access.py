"""Who reads /metrics: a bearer token, an allowed network, nobody else; off when neither is set."""
import ipaddress

import pytest

from benchsite.config.load import ConfigError, read_group
from benchsite.config.metrics import Metrics

from .scrape import TOKEN

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(settings):
    settings.BENCH_METRICS_TOKEN, settings.BENCH_METRICS_ALLOW = TOKEN, []


@pytest.fixture
def allow_local(settings):
    settings.BENCH_METRICS_TOKEN, settings.BENCH_METRICS_ALLOW = "", [ipaddress.ip_network("127.0.0.0/8")]


def test_off_when_neither_variable_is_set(client, settings):
    settings.BENCH_METRICS_TOKEN, settings.BENCH_METRICS_ALLOW = "", []
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


def test_token(client, token):
    ok = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain; version=0.0.4")
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401


def test_allowed_networks(client, allow_local):
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    refused = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert refused.status_code == 403 and b"192.0.2.7" in refused.content
    assert client.get("/metrics", REMOTE_ADDR="not-an-address").status_code == 403
    # a token shown where none is set up is a mistake to tell, even from an allowed address
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer x").status_code == 401


def test_both_set_either_one_is_enough(client, settings):
    settings.BENCH_METRICS_TOKEN, settings.BENCH_METRICS_ALLOW = TOKEN, [ipaddress.ip_network("10.0.0.0/8")]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 401


def test_only_get(client, token):
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


def test_reachable_on_a_private_dashboard(client, token, settings):
    settings.BENCH_PRIVATE_DASHBOARD = True
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_networks_variable(monkeypatch):
    monkeypatch.setenv("BENCH_METRICS_ALLOW", "10.0.0.0/8, 192.168.1.5,2001:db8::/32")
    assert [str(n) for n in read_group(Metrics).allow] == ["10.0.0.0/8", "192.168.1.5/32", "2001:db8::/32"]
    monkeypatch.setenv("BENCH_METRICS_ALLOW", "10.0.0.0/8,10.0.0.0/33")
    with pytest.raises(ConfigError, match=r"BENCH_METRICS_ALLOW: '10.0.0.0/33' is not an address or CIDR"):
        read_group(Metrics)
    monkeypatch.delenv("BENCH_METRICS_ALLOW")
    assert read_group(Metrics).allow == []


def test_bad_settings_stop_the_start_naming_the_variable(tmp_path):
    from tests.benchsite.test_settings import settings_in

    bad = settings_in({"BENCH_METRICS_ALLOW": "10.0.0.0/8,office"}, "s.BENCH_METRICS_ALLOW")
    assert bad.returncode != 0 and "BENCH_METRICS_ALLOW: 'office' is not an address or CIDR" in bad.stderr
    missing = settings_in({"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "absent")}, "s.PROMETHEUS_MULTIPROC_DIR")
    assert missing.returncode != 0 and "PROMETHEUS_MULTIPROC_DIR=" in missing.stderr and "is not a folder" in missing.stderr
    good = settings_in({"BENCH_METRICS_ALLOW": "10.0.0.0/8", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
                       "(s.BENCH_METRICS_TOKEN, [str(n) for n in s.BENCH_METRICS_ALLOW])")
    assert good.stdout.strip() == "('', ['10.0.0.0/8'])", good.stderr
