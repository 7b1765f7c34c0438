"""Who may read /metrics: a bearer token (BENCH_METRICS_TOKEN) or an address in the allowed
networks (BENCH_METRICS_ALLOW). With neither set, the endpoint does not exist (404)."""
import hmac
import ipaddress
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


def _token_matches(authorization: str, token: str) -> bool:
    scheme, _, presented = authorization.partition(" ")
    # compare_digest: the time taken says nothing about how much of the token was right
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


def _address_allowed(address: str, networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def refusal(authorization: str, address: str) -> Refusal | None:
    """None when the request may read the metrics; else the answer's status and why."""
    token, networks = settings.BENCH_METRICS_TOKEN, settings.BENCH_METRICS_ALLOW
    if not token and not networks:
        return Refusal(404, "metrics are off: set BENCH_METRICS_TOKEN or BENCH_METRICS_ALLOW")
    if authorization:  # a token shown is checked even from an allowed address: a wrong one is a mistake to tell
        if token and _token_matches(authorization, token):
            return None
        return Refusal(401, "wrong bearer token" if token else "no token is set up: scrape from an allowed address")
    if networks and _address_allowed(address, networks):
        return None
    if token:
        return Refusal(401, "send Authorization: Bearer <BENCH_METRICS_TOKEN>")
    return Refusal(403, f"address {address or '?'} is not in BENCH_METRICS_ALLOW")
