"""Typed reads of environment variables, with a clear error for a bad value.

The words and rules are runners.envvars' (shared with the GPU side); here a bad value
becomes Django's ImproperlyConfigured.
"""
import ipaddress
import os

from django.core.exceptions import ImproperlyConfigured

from runners import envvars


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    try:
        return envvars.env_bool(name, default)
    except envvars.EnvVarError as e:
        raise ImproperlyConfigured(str(e)) from None


def env_int(name: str, default: int, minimum: int = 0) -> int:
    try:
        return envvars.env_int(name, default, minimum)
    except envvars.EnvVarError as e:
        raise ImproperlyConfigured(str(e)) from None


def env_fraction(name: str, default: float) -> float:
    """A positive number such as 0.25 (= 25%); unset or empty: DEFAULT."""
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number (0.25 = 25%)") from None
    if not value > 0:
        raise ImproperlyConfigured(f"{name}={raw!r} must be above 0")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def env_required(name: str, because: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ImproperlyConfigured(f"{name} must be set when {because}")
    return value


def env_networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Comma-separated CIDRs (10.0.0.0/8, 2001:db8::/32; a bare address is one host); unset: none."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an address or CIDR such as 10.0.0.0/8") from None
    return networks
