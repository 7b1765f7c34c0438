"""Kept job specs no run points at any more (its runs deleted in the admin, or with their
benchmark): bench_gc deletes them. A row some run points at is never deleted (the foreign key
PROTECTs it); one a trigger is about to point a run at is locked by that trigger (jobspec.spec_keep),
and should the deletion still meet a run stored meanwhile, it is refused and left for the next pass."""
from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, ProtectedError

from ..models import KeptSpec, Run

BATCH = 500


def orphan_specs():
    return KeptSpec.objects.filter(~Exists(Run.objects.filter(kept_spec=OuterRef("pk"))))


def specs_collect(*, dry_run: bool = False, batch_size: int = BATCH) -> int:
    """Delete (DRY_RUN: count) the kept specs no run points at; returns how many."""
    ids = list(orphan_specs().order_by("id").values_list("id", flat=True))
    if dry_run:
        return len(ids)
    deleted = 0
    for start in range(0, len(ids), batch_size):
        try:
            with transaction.atomic():
                count, _ = orphan_specs().filter(id__in=ids[start:start + batch_size]).delete()
        except (ProtectedError, IntegrityError):  # a run came to point at one meanwhile: the next pass
            continue
        deleted += count
    return deleted
