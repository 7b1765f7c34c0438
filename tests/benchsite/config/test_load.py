"""benchsite/config/: the defaults need no variable, every bad variable is named at once, the
words are the runners', and the variables the runners share with the web side have one reader."""
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from benchsite.config import ConfigError, load
from benchsite.config.fields import CommaList, Flag, Url
from runners import envvars
from runners.config import RunnerConfig
from runners.probes.registry import module_names

from .conftest import BASE


def test_defaults_need_no_variable(environ):
    config = load(BASE)
    assert (config.var_dir, config.artifacts_dir, config.tiny_model_dir, config.shared.work_dir) == (
        BASE / "var", BASE / "var/artifacts", BASE / "var/tiny-model", BASE / "var/work")
    assert (config.web.debug, config.database.url, config.broker.url, config.storage.backend) == (
        True, "", "filesystem://", "filesystem")
    assert (config.workers.heartbeat_interval_s, config.workers.heartbeat_timeout_s) == (20, 300)
    assert (config.shared.allow_file_repos, config.shared.probe_modules) == (False, [])


def test_folders_follow_the_data_folder_unless_set(environ):
    environ.setenv("BENCH_VAR_DIR", "/data")
    environ.setenv("BENCH_ARTIFACTS_DIR", "/bucket")
    config = load(BASE)
    assert (config.var_dir, config.artifacts_dir, config.tiny_model_dir, config.shared.work_dir) == (
        Path("/data"), Path("/bucket"), Path("/data/tiny-model"), Path("/data/work"))


def test_every_bad_variable_is_named_at_once(environ, tmp_path):
    bad = {"DJANGO_DEBUG": "maybe", "DJANGO_HSTS_SECONDS": "a year", "DATABASE_URL": "mongo://db/bench",
           "BENCH_ARTIFACTS_BACKEND": "ftp", "BENCH_HEARTBEAT_INTERVAL_S": "0", "BENCH_VERDICT_MIN_HISTORY": "1",
           "BENCH_COMM_HEALTH_DRIFT": "lots", "BENCH_METRICS_ALLOW": "10.0.0.0/8,office",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "absent"), "BENCH_ALLOW_FILE_REPOS": "perhaps"}
    for name, value in bad.items():
        environ.setenv(name, value)
    with pytest.raises(ConfigError) as raised:
        load(BASE)
    problems = raised.value.problems
    assert [p.split("=")[0].split(":")[0] for p in problems] == [  # in the reference's order
        "DJANGO_DEBUG", "DJANGO_HSTS_SECONDS", "DATABASE_URL", "BENCH_ARTIFACTS_BACKEND",
        "BENCH_HEARTBEAT_INTERVAL_S", "BENCH_VERDICT_MIN_HISTORY", "BENCH_COMM_HEALTH_DRIFT",
        "BENCH_METRICS_ALLOW", "PROMETHEUS_MULTIPROC_DIR", "BENCH_ALLOW_FILE_REPOS"]
    assert problems[0] == "DJANGO_DEBUG='maybe' is not a boolean (use 1/0, true/false, yes/no, on/off)"
    assert problems[1] == "DJANGO_HSTS_SECONDS='a year' is not an integer"
    assert problems[2].startswith("DATABASE_URL='mongo://db/bench' is not a database URL: Scheme 'mongo://' is unknown")
    assert problems[3] == "BENCH_ARTIFACTS_BACKEND='ftp' expected one of 'filesystem' or 's3'"
    assert problems[4] == "BENCH_HEARTBEAT_INTERVAL_S=0 must be at least 1"
    assert problems[5] == "BENCH_VERDICT_MIN_HISTORY=1 must be at least 2"
    assert problems[6] == "BENCH_COMM_HEALTH_DRIFT='lots' is not a number"
    assert problems[7] == "BENCH_METRICS_ALLOW: 'office' is not an address or CIDR such as 10.0.0.0/8"
    assert problems[8].startswith(f"PROMETHEUS_MULTIPROC_DIR='{tmp_path / 'absent'}' is not a folder")
    assert problems[9] == "BENCH_ALLOW_FILE_REPOS='perhaps' is not a boolean (use 1/0, true/false, yes/no, on/off)"
    assert str(raised.value).splitlines()[1:] == [f"  {p}" for p in problems]


@pytest.mark.parametrize("variables, problem", [
    ({"DJANGO_DEBUG": "0"}, "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off"),
    ({"BENCH_ARTIFACTS_BACKEND": "s3", "BENCH_ARTIFACTS_S3_BUCKET": ""},
     "BENCH_ARTIFACTS_S3_BUCKET must be set when BENCH_ARTIFACTS_BACKEND=s3"),
    ({"BENCH_HEARTBEAT_INTERVAL_S": "200"}, "BENCH_HEARTBEAT_TIMEOUT_S=300 must be at least twice "
                                            "BENCH_HEARTBEAT_INTERVAL_S=200, or a slow beat reaps a live run"),
    ({"BENCH_COMM_HEALTH_DRIFT": "0"}, "BENCH_COMM_HEALTH_DRIFT=0 must be above 0"),
    ({"BENCH_LOG_LEVEL": "info"},
     "BENCH_LOG_LEVEL='info' is not a log level: NOTSET, DEBUG, INFO, WARN, WARNING, ERROR, CRITICAL, FATAL"),
])
def test_checks_beyond_the_type_name_the_variables(environ, variables, problem):
    for name, value in variables.items():
        environ.setenv(name, value)
    with pytest.raises(ConfigError) as raised:
        load(BASE)
    assert raised.value.problems == [problem]


@pytest.mark.parametrize("raw", ["1", "true", "YES", " on ", "0", "False", "no", "off", "", "2", "t", "enabled"])
def test_booleans_take_the_runners_words(raw):
    try:
        expected = envvars.parse_bool("X", raw)
    except envvars.EnvVarError:
        with pytest.raises(ValueError, match="is not a boolean"):
            TypeAdapter(Flag).validate_python(raw)
    else:
        assert TypeAdapter(Flag).validate_python(raw) is expected


def test_lists_urls_and_blank_fractions(environ):
    environ.setenv("DJANGO_ALLOWED_HOSTS", " bench.example.org,, 10.0.0.5 ")
    environ.setenv("BENCH_PUBLIC_URL", "https://bench.example.org/")
    environ.setenv("BENCH_COMM_HEALTH_DRIFT", "")
    config = load(BASE)
    assert config.web.allowed_hosts == ["bench.example.org", "10.0.0.5"]  # comma-separated, not JSON
    assert config.web.public_url == "https://bench.example.org"
    assert config.regressions.comm_health_drift == 0.25  # empty: the default
    assert TypeAdapter(CommaList).validate_python('["a"]') == ['["a"]']
    assert TypeAdapter(Url).validate_python("http://h:1//") == "http://h:1"


def test_the_variables_shared_with_the_runners_read_the_same(environ, tmp_path):
    environ.setenv("BENCH_WORK_DIR", str(tmp_path / "work"))
    environ.setenv("BENCH_ALLOW_FILE_REPOS", "yes")
    environ.setenv("BENCH_PROBE_MODULES", " my.probes, other.probes ,")
    shared, runner = load(BASE).shared, RunnerConfig.from_env()
    assert shared.work_dir == runner.work_dir == tmp_path / "work"
    assert shared.allow_file_repos is runner.allow_file_repos is True
    assert shared.probe_modules == module_names(runner.probe_modules) == ["my.probes", "other.probes"]


def test_secrets_stay_out_of_reprs(environ):
    """Django's debug page and logs may print a setting: the secrets are not in the groups' reprs."""
    secrets = {"DJANGO_SECRET_KEY": "s-key", "DATABASE_URL": "postgres://bench:pw-db@db/bench",
               "CELERY_BROKER_URL": "redis://:pw-broker@redis:6379/0", "BENCH_GITHUB_TOKEN": "ghp-token",
               "BENCH_GITHUB_APP_WEBHOOK_SECRET": "app-secret", "BENCH_GITLAB_TOKEN": "glpat-token",
               "BENCH_ALERT_SECRET": "alert-secret", "BENCH_METRICS_TOKEN": "metrics-token",
               "BENCH_ARTIFACTS_S3_SECRET_ACCESS_KEY": "s3-secret", "BENCH_CACHE_URL": "redis://:pw-cache@redis"}
    for name, value in secrets.items():
        environ.setenv(name, value)
    config = load(BASE)
    assert config.github.token == "ghp-token"
    shown = repr(config)
    assert [value for value in secrets.values() if value in shown] == []


@pytest.mark.parametrize("value, says", [
    ("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", "not a PEM private key"),
    ("@/nonexistent/app.pem", "cannot read /nonexistent/app.pem"),
])
def test_a_bad_github_app_key_stops_the_start_without_being_shown(environ, value, says):
    environ.setenv("BENCH_GITHUB_APP_PRIVATE_KEY", value)
    with pytest.raises(ConfigError) as raised:
        load(BASE)
    [problem] = raised.value.problems
    assert problem.startswith(f"BENCH_GITHUB_APP_PRIVATE_KEY: {says}") and "AAAA" not in problem
