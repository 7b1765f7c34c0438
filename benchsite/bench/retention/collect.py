"""bench_gc's work: find the files the policy lets go, keep those of protected runs, free the
rest in the artifact storage (filesystem or S3) and mark their rows.

The Artifact row, the run and its measurements always stay: a freed row gets `file` emptied and
`removed_at`/`removed_reason` set, so running it again finds nothing more to do. A file is
deleted before its row is marked: a run cut in between leaves a row that the next run deletes
again (a missing file deletes fine on both storages) and then marks."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import F
from django.utils import timezone

from ..models import Artifact
from ..storage.artifacts import storage
from .policy import Policy
from .protected import Protector, RunFacts

BATCH = 500


@dataclass
class Report:
    policy: Policy
    dry_run: bool
    freed: Counter = field(default_factory=Counter)  # files per kind
    freed_bytes: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)  # files per rule
    kept_bytes: Counter = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)


def _expired(kind: str, cutoff: datetime, batch_size: int):
    """The stored files of KIND older than CUTOFF, in batches (bounded memory). The walk follows
    the partial index artifact_live_kind_idx (files not removed yet) in id order; ids grow with
    time, so the files still in their days come last and are walked once per pass."""
    rows = (Artifact.objects.filter(kind=kind, created_at__lt=cutoff, removed_at__isnull=True).exclude(file="")
            .order_by("id").values("id", "kind", "file", "size", "run_id", benchmark_id=F("run__benchmark_id"),
                                   commit=F("run__commit"), run_created_at=F("run__created_at")))
    last = 0
    while batch := list(rows.filter(id__gt=last)[:batch_size]):
        yield batch
        last = batch[-1]["id"]


def _free(rows: list[dict], reason: str, now: datetime, report: Report) -> None:
    store, done = storage(), []
    for row in rows:
        try:
            store.delete(row["file"])
        except Exception as exc:  # noqa: BLE001 - bucket away, permissions: reported, the row stays as it was
            report.failed.append(f"{row['file']}: {type(exc).__name__}: {exc}")
            continue
        done.append(row)
    Artifact.objects.filter(id__in=[row["id"] for row in done], removed_at__isnull=True).update(
        file="", removed_at=now, removed_reason=reason)
    for row in done:
        report.freed[row["kind"]] += 1
        report.freed_bytes[row["kind"]] += row["size"]


def collect(*, policy: Policy, dry_run: bool = False, now: datetime | None = None, batch_size: int = BATCH) -> Report:
    """Free (or, with DRY_RUN, only count) what POLICY allows as of NOW, BATCH_SIZE files at a time."""
    now, report, protector = now or timezone.now(), Report(policy=policy, dry_run=dry_run), Protector()
    for kind, cutoff in policy.cutoffs(now).items():
        for batch in _expired(kind, cutoff, batch_size):
            facts = [RunFacts(row["run_id"], row["benchmark_id"], row["commit"], row["run_created_at"]) for row in batch]
            kept = protector.rules_for(facts)
            freeable = []
            for row in batch:
                rule = kept.get(row["run_id"])
                if rule:
                    report.kept[rule] += 1
                    report.kept_bytes[rule] += row["size"]
                else:
                    freeable.append(row)
            if dry_run:
                for row in freeable:
                    report.freed[row["kind"]] += 1
                    report.freed_bytes[row["kind"]] += row["size"]
            else:
                _free(freeable, policy.reason(kind), now, report)
    return report
