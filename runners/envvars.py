"""Typed reads of environment variables: one set of words for booleans, everywhere.

Booleans accept 1/0, true/false, yes/no, on/off (any case, surrounding blanks ignored),
and an empty value is false (`FOO=` switches a flag off; the safe reading for
DJANGO_DEBUG). An unset variable gives the default. Numbers must parse; an empty number
is an error, not the default. A bad value raises EnvVarError (a ValueError) naming the
variable and the words it accepts. `environ`
defaults to os.environ; pass another mapping to read an environment that is not ours
(e.g. the one an engine will be started with).
"""
from __future__ import annotations

import os
from typing import Mapping

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


class EnvVarError(ValueError):
    """An environment variable holds a value of the wrong kind."""


def raw_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's text, or None when it is unset."""
    return (os.environ if environ is None else environ).get(name)


def parse_bool(name: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise EnvVarError(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def parse_int(name: str, raw: str, minimum: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise EnvVarError(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise EnvVarError(f"{name}={value} must be at least {minimum}")
    return value


def parse_float(name: str, raw: str, minimum: float | None = None) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise EnvVarError(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise EnvVarError(f"{name}={raw!r} is not a finite number")
    if minimum is not None and value < minimum:
        raise EnvVarError(f"{name}={value:g} must be at least {minimum:g}")
    return value


def env_bool(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    raw = raw_value(name, environ)
    return default if raw is None else parse_bool(name, raw)


def env_int(name: str, default: int, minimum: int | None = None,
            environ: Mapping[str, str] | None = None) -> int:
    raw = raw_value(name, environ)
    return default if raw is None else parse_int(name, raw, minimum)


def env_float(name: str, default: float, minimum: float | None = None,
              environ: Mapping[str, str] | None = None) -> float:
    raw = raw_value(name, environ)
    return default if raw is None else parse_float(name, raw, minimum)


def env_bool_or_auto(name: str, environ: Mapping[str, str] | None = None) -> bool | None:
    """A boolean that may also be `auto` (or unset/blank): None then, for the caller to decide."""
    raw = raw_value(name, environ)
    if raw is None or raw.strip().lower() in ("", "auto"):
        return None
    try:
        return parse_bool(name, raw)
    except EnvVarError:
        raise EnvVarError(f"{name}={raw!r} is not a boolean or auto "
                          "(use 1/0, true/false, yes/no, on/off, auto)") from None
