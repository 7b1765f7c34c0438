"""runners.envvars: the words every environment variable accepts, on the GPU side and the web side."""
import pytest

from runners import envvars
from runners.config import RunnerConfig
from runners.engine import is_cpu_build


@pytest.mark.parametrize("raw, expected", [
    ("1", True), ("true", True), ("YES", True), (" on ", True),
    ("0", False), ("False", False), ("no", False), ("off", False), ("", False),
])
def test_bool_words(raw, expected):
    assert envvars.env_bool("X", not expected, environ={"X": raw}) is expected


def test_unset_gives_the_default():
    assert envvars.env_bool("X", True, environ={}) is True
    assert envvars.env_int("X", 7, environ={}) == 7
    assert envvars.env_float("X", 2.5, environ={}) == 2.5
    assert envvars.env_bool_or_auto("X", environ={}) is None


@pytest.mark.parametrize("call, message", [
    (lambda: envvars.env_bool("X", True, environ={"X": "maybe"}), "X='maybe' is not a boolean"),
    (lambda: envvars.env_int("X", 1, environ={"X": "1.5"}), "X='1.5' is not an integer"),
    (lambda: envvars.env_int("X", 1, minimum=2, environ={"X": "1"}), "X=1 must be at least 2"),
    (lambda: envvars.env_int("X", 1, environ={"X": ""}), "X='' is not an integer"),
    (lambda: envvars.env_float("X", 1.0, environ={"X": "ten"}), "X='ten' is not a number"),
    (lambda: envvars.env_float("X", 1.0, environ={"X": "nan"}), "not a finite number"),
    (lambda: envvars.env_float("X", 1.0, minimum=0.0, environ={"X": "-1"}), "X=-1 must be at least 0"),
    (lambda: envvars.env_bool_or_auto("X", environ={"X": "sometimes"}), "not a boolean or auto"),
])
def test_bad_values_name_the_variable(call, message):
    with pytest.raises(envvars.EnvVarError, match=message):
        call()


def test_numbers():
    assert envvars.env_int("X", 1, minimum=0, environ={"X": " 42 "}) == 42
    assert envvars.env_float("X", 1.0, environ={"X": "0.25"}) == 0.25


@pytest.mark.parametrize("raw, expected", [("on", True), ("yes", True), ("off", False), ("0", False)])
def test_engine_cpu_switch_takes_the_same_words(monkeypatch, raw, expected):
    monkeypatch.setenv("BENCH_ENGINE_CPU", raw)
    assert is_cpu_build(configured=RunnerConfig.from_env().engine_cpu) is expected


def test_engine_cpu_switch_rejects_other_words(monkeypatch):
    monkeypatch.setenv("BENCH_ENGINE_CPU", "gpu")
    with pytest.raises(ValueError, match="BENCH_ENGINE_CPU='gpu' is not a boolean or auto"):
        RunnerConfig.from_env()


def test_the_web_settings_use_the_same_words(monkeypatch):
    from benchsite.config.load import ConfigError, read_group
    from benchsite.config.web import Web
    from benchsite.config.workers import Workers

    monkeypatch.setenv("DJANGO_DEBUG", "on")
    assert read_group(Web).debug is True
    monkeypatch.setenv("DJANGO_DEBUG", "nope")
    with pytest.raises(ConfigError, match="DJANGO_DEBUG='nope' is not a boolean"):
        read_group(Web)
    monkeypatch.setenv("BENCH_REAPER_INTERVAL_S", "0")
    with pytest.raises(ConfigError, match="BENCH_REAPER_INTERVAL_S=0 must be at least 1"):
        read_group(Workers)
