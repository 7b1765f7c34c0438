"""The operations documents stay true to the metrics: the alert rules pass `promtool check rules`,
the Grafana dashboard is valid JSON, and every metric they or docs/operations.md name is exposed
(and every exposed one is listed in docs/operations.md)."""
import json
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

from .scrape import TOKEN

OPERATIONS = ROOT / "docs" / "operations"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
NAME = re.compile(r"\bdecode_bench_\w+")


@pytest.fixture
def exposed(client, settings, db) -> set[str]:
    """Every sample name a scrape can hold (a histogram's and a counter's suffixes included)."""
    settings.BENCH_METRICS_TOKEN = TOKEN
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names |= {name, *(f"{name}{s}" for s in ("_bucket", "_sum", "_count"))} if kind == "histogram" else {name}
    return names


def test_promtool_checks_the_alert_rules():
    checked = subprocess.run([PROMTOOL, "check", "rules", str(OPERATIONS / "alerts.yml")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_the_dashboard_is_grafana_json():
    dashboard = json.loads((OPERATIONS / "grafana-dashboard.json").read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(t["expr"] for p in dashboard["panels"] for t in p["targets"])


@pytest.mark.parametrize("document", ["alerts.yml", "grafana-dashboard.json", "../operations.md"])
def test_every_metric_named_is_exposed(exposed, document):
    named = set(NAME.findall((OPERATIONS / document).read_text()))
    assert named and named - exposed == set()


def test_every_exposed_metric_is_listed_in_operations_md(exposed):
    listed = set(NAME.findall((ROOT / "docs" / "operations.md").read_text()))
    families = {n for n in exposed if not n.endswith(("_bucket", "_sum", "_count"))}
    assert families - listed == set()
