"""Comm health checks per host: each figure (runners/probes/health.py, sent by the GPU worker before a
batch) is stored and compared with the median of the host's own earlier checks of the same kind
(backend, ranks, size). Beyond the drift threshold the host is flagged, and verdicts of its runs
say that the interconnect, not the commit, may be what moved."""
from __future__ import annotations

from statistics import median

from django.conf import settings
from django.utils import timezone

from benchsite.bench.models import Run

from .models import HostHealth


class HealthMessageError(ValueError):
    """A health message that does not have the fields the worker sends."""


def _check_message(doc) -> None:
    if not isinstance(doc, dict):
        raise HealthMessageError("the health check is not an object")
    for key, limit in (("hostname", 200), ("backend", 10), ("error", 500), ("batch", 64), ("fingerprint", 300)):
        if not isinstance(doc.get(key, ""), str) or len(doc.get(key, "")) > limit:
            raise HealthMessageError(f"health check {key} is not a string of at most {limit} characters")
    if not doc.get("hostname"):
        raise HealthMessageError("health check without a hostname")
    for key in ("bytes", "world_size"):
        if not isinstance(doc.get(key), int) or isinstance(doc.get(key), bool) or doc[key] < 0:
            raise HealthMessageError(f"health check {key} {doc.get(key)!r} is not a whole number")
    us = doc.get("allreduce_us")
    if us is not None and (isinstance(us, bool) or not isinstance(us, (int, float)) or not us > 0):
        raise HealthMessageError(f"health check allreduce_us {us!r} is not a positive number")


def host_health_record(*, doc: dict, now=None) -> HostHealth:
    """Store one check; flag it when it drifted beyond settings.BENCH_COMM_HEALTH_DRIFT from the host's
    own history, or when the probe failed."""
    _check_message(doc)
    same_kind = HostHealth.objects.filter(hostname=doc["hostname"], backend=doc.get("backend", ""),
                                          world_size=doc["world_size"], bytes=doc["bytes"],
                                          allreduce_us__isnull=False)
    latest = same_kind.order_by("-measured_at", "-id")[:settings.BENCH_COMM_HEALTH_HISTORY]
    history = [h.allreduce_us for h in latest]
    row = HostHealth(hostname=doc["hostname"], fingerprint=doc.get("fingerprint", ""), batch=doc.get("batch", ""),
                     backend=doc.get("backend", ""), world_size=doc["world_size"], bytes=doc["bytes"],
                     allreduce_us=doc.get("allreduce_us"), error=doc.get("error", ""), measured_at=now or timezone.now())
    if row.allreduce_us is None:
        row.flagged, row.note = True, f"comm health check failed: {row.error or 'no figure'}"
    elif len(history) >= 3:
        row.baseline_us = median(history)
        row.drift = (row.allreduce_us - row.baseline_us) / row.baseline_us
        limit = settings.BENCH_COMM_HEALTH_DRIFT
        if abs(row.drift) > limit:
            row.flagged = True
            row.note = (f"allreduce latency {row.allreduce_us:.1f} us, {row.drift * 100:+.0f}% from this host's "
                        f"median of {len(history)} earlier checks ({row.baseline_us:.1f} us; limit ±{limit * 100:.0f}%)")
    row.save()
    return row


def host_health_for(run: Run) -> HostHealth | None:
    """The host's latest check up to the end of `run` (the one before its batch)."""
    if not run.worker_host:
        return None
    until = run.finished_at or timezone.now()
    return (HostHealth.objects.filter(hostname=run.worker_host, measured_at__lte=until)
            .order_by("-measured_at", "-id").first())


def host_health_note(run: Run) -> str:
    """What a verdict of `run` says when its host was flagged; '' otherwise."""
    check = host_health_for(run)
    if check is None or not check.flagged:
        return ""
    return (f"host {run.worker_host} flagged by its comm health check ({check.note}): a slow interconnect "
            "may be what moved, not this commit")
