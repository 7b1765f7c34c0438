"""The web side reads its environment once, through the typed settings (benchsite/config/) that
benchsite/settings.py loads; the code reads django.conf.settings (regressions' settings included).
A bad value stops every process at start, naming the variable."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

READERS = "config/"  # the typed settings, which settings.py loads


def settings_in(env: dict, expression: str) -> subprocess.CompletedProcess:
    code = ("import django; django.setup(); from django.conf import settings as s; "
            f"print(repr({expression}))")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "DJANGO_SETTINGS"))}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**base, "DJANGO_SETTINGS_MODULE": "benchsite.settings", **env})


def test_regressions_settings_are_django_settings():
    defaults = settings_in({}, "(s.BENCH_VERDICT_MIN_HISTORY, s.BENCH_VERDICT_MAX_HISTORY, "
                               "s.BENCH_CONFIRM_REGRESSIONS, s.BENCH_CONFIRM_HOST_SEEN_H, s.BENCH_ALERT_MAX_RETRIES, "
                               "s.BENCH_ALERT_RETRY_BASE_MS, s.BENCH_ALERT_TIMEOUT_S, s.BENCH_ALERT_SECRET, "
                               "s.BENCH_ALERT_FROM_EMAIL, s.BENCH_COMM_HEALTH_DRIFT, s.BENCH_COMM_HEALTH_HISTORY, "
                               "s.BENCH_ALLOW_FILE_REPOS)")
    assert defaults.returncode == 0, defaults.stderr
    assert defaults.stdout.strip() == "(3, 20, True, 24, 5, 30000, 10, '', '', 0.25, 10, False)"
    set_ = settings_in({"BENCH_VERDICT_MIN_HISTORY": "5", "BENCH_CONFIRM_REGRESSIONS": "0",
                        "BENCH_COMM_HEALTH_DRIFT": "0.1", "BENCH_ALLOW_FILE_REPOS": "1"},
                       "(s.BENCH_VERDICT_MIN_HISTORY, s.BENCH_CONFIRM_REGRESSIONS, s.BENCH_COMM_HEALTH_DRIFT, "
                       "s.BENCH_ALLOW_FILE_REPOS)")
    assert set_.stdout.strip() == "(5, False, 0.1, True)", set_.stderr


def test_a_bad_value_stops_start_up_naming_the_variable():
    bad = settings_in({"BENCH_COMM_HEALTH_DRIFT": "lots"}, "s.BENCH_COMM_HEALTH_DRIFT")
    assert bad.returncode != 0 and "BENCH_COMM_HEALTH_DRIFT='lots' is not a number" in bad.stderr
    bad = settings_in({"BENCH_VERDICT_MIN_HISTORY": "1"}, "s.BENCH_VERDICT_MIN_HISTORY")
    assert bad.returncode != 0 and "BENCH_VERDICT_MIN_HISTORY=1 must be at least 2" in bad.stderr


def _is_os_environ(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os")


def _literal_reads(tree) -> list[tuple[int, str]]:
    """os.environ.get("NAME"), os.environ["NAME"], os.getenv("NAME"), env("NAME", ...): a
    setting read in place.
    (A name held in a variable, such as a webhook's `secret_env`, is data, not a setting.)"""
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            func, arg = node.func, node.args[0]
            getter = (func.attr == "get" and _is_os_environ(func.value)) or (
                func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os")
            if getter and isinstance(arg, ast.Constant):
                reads.append((node.lineno, arg.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id.startswith("env") and isinstance(node.args[0], ast.Constant):  # a declaration
                reads.append((node.lineno, node.args[0].value))
        if isinstance(node, ast.Subscript) and _is_os_environ(node.value) and isinstance(node.slice, ast.Constant):
            reads.append((node.lineno, node.slice.value))
    return reads


def test_no_module_but_settings_reads_a_setting_from_the_environment():
    offenders = []
    for path in sorted((ROOT / "benchsite").rglob("*.py")):
        rel = path.relative_to(ROOT / "benchsite").as_posix()
        if rel.startswith(READERS):
            continue
        offenders += [f"benchsite/{rel}:{line} {name}" for line, name in _literal_reads(ast.parse(path.read_text()))]
    assert offenders == [], "declare a setting in benchsite/config/, name it in settings.py, read django.conf.settings"
    assert not (ROOT / "benchsite" / "regressions" / "conf.py").exists()


def test_retention_days_default_to_30_and_90_and_refuse_what_is_not_a_day_count():
    defaults = settings_in({}, "(s.BENCH_RETAIN_TRACES_DAYS, s.BENCH_RETAIN_LOGS_DAYS)")
    assert defaults.stdout.strip() == "(30, 90)", defaults.stderr
    forever = settings_in({"BENCH_RETAIN_TRACES_DAYS": "0"}, "s.BENCH_RETAIN_TRACES_DAYS")
    assert forever.stdout.strip() == "0", forever.stderr  # 0: kept forever
    bad = settings_in({"BENCH_RETAIN_LOGS_DAYS": "a month"}, "s.BENCH_RETAIN_LOGS_DAYS")
    assert bad.returncode != 0 and "BENCH_RETAIN_LOGS_DAYS='a month' is not an integer" in bad.stderr


@pytest.mark.parametrize("start", [
    [sys.executable, "manage.py", "check"],
    [sys.executable, "-c", "import benchsite.wsgi"],  # what gunicorn loads before it serves a request
], ids=["manage.py", "wsgi"])
def test_a_bad_setting_stops_the_service_at_start_naming_every_bad_variable(start):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "DJANGO_"))}
    done = subprocess.run(start, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**base, "DJANGO_SETTINGS_MODULE": "benchsite.settings",
                               "BENCH_HEARTBEAT_INTERVAL_S": "0", "DJANGO_DEBUG": "maybe"})
    assert done.returncode != 0
    assert "ImproperlyConfigured: bad configuration (docs/configuration.md)" in done.stderr
    assert "BENCH_HEARTBEAT_INTERVAL_S=0 must be at least 1" in done.stderr
    assert "DJANGO_DEBUG='maybe' is not a boolean" in done.stderr
