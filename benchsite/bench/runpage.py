"""Reads for the run page beyond its facts: live progress, correctness evidence with both
outputs, the time budget, and the command that reproduces the run on a GPU host."""
from __future__ import annotations

import json
import shlex

from django.utils import timezone

from runners.contract import AB_ALLREDUCE_MS_DELTA, CORRECT, GREEDY_ARTIFACT

from . import selectors, services
from .artifacts import ArtifactError
from .models import Artifact, Run
from .timebudget import run_time_budget


def run_elapsed_s(run: Run) -> float | None:
    if run.started_at is None:
        return None
    return max(0.0, ((run.finished_at or timezone.now()) - run.started_at).total_seconds())


def run_live(*, run: Run) -> dict:
    """The polled JSON: run_status plus elapsed seconds and the server log's tail."""
    _artifact, tail = selectors.run_log_tail(run=run)
    return {**selectors.run_status(run=run), "elapsed_s": run_elapsed_s(run), "log_tail": tail}


def _greedy_text(run_id: int | None) -> str | None:
    if run_id is None:
        return None
    artifact = (Artifact.objects.filter(run_id=run_id, kind=Artifact.Kind.PROBE_JSON, name=GREEDY_ARTIFACT)
                .exclude(file="").first())
    if artifact is None:
        return None
    try:
        return json.loads(artifact.read_text()).get("text")
    except (ValueError, AttributeError, ArtifactError):
        return None


def run_correctness(*, measurements) -> dict | None:
    """The verdict's evidence (first divergence, reason) and both greedy texts; None when not judged."""
    verdict = next((m for m in measurements if m.metric == CORRECT), None)
    if verdict is None:
        return None
    details = verdict.details or {}
    reference_run = details.get("reference_run")
    return {"correct": verdict.value == 1.0, "details": details, "reference_run": reference_run,
            "verdict": details.get("verdict", "correct" if verdict.value == 1.0 else "incorrect"),
            "text": _greedy_text(verdict.run_id), "reference_text": _greedy_text(reference_run)}


def run_budget(*, measurements) -> dict | None:
    values = {m.metric: m.value for m in measurements}
    ab = next((m.details for m in measurements if m.metric == AB_ALLREDUCE_MS_DELTA), None)
    return run_time_budget(values=values, ab_details=ab)


def run_reproduce(*, run: Run) -> dict:
    """The job spec as JSON and the command that runs it with the runners alone."""
    spec = services.run_spec(run)
    spec_name = f"run-{run.pk}-spec.json"
    command = shlex.join(["python", "-m", "runners", "execute", spec_name, "--out", f"run-{run.pk}-result.json"])
    return {"spec_json": json.dumps(spec, indent=2, sort_keys=True), "spec_name": spec_name, "command": command}
