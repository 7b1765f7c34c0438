"""Writes. Views, tasks and commands call these; they hold the run life cycle."""
import logging
import uuid
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import artifacts as artifact_store
from .comparisons import correctness_judge, runs_compare_comm_ab
from runners import hostinfo
from runners.contract import BUILD_PATHS, FAILURE_KINDS, JobSpec, SpecError, check_ref, is_full_sha, patch_sha256

from .models import Artifact, Benchmark, Build, EngineSource, Measurement, Patch, ReaperState, Run, Variant
from .signals import run_finished

log = logging.getLogger(__name__)


class TriggerError(Exception):
    """A run cannot be triggered as asked (the message says why)."""


def _patch_specs(run: Run) -> list[dict]:
    """The benchmark's, then the variant's, then the run's own patches, in that order."""
    layers = (("benchmark", run.benchmark.patches), ("variant", run.variant.patches), ("run", run.patches))
    return [{"name": p.name, "sha256": p.sha256, "content": p.content, "origin": origin}
            for origin, manager in layers for p in manager.order_by("id")]


def _engine_spec(run: Run) -> dict:
    source = run.benchmark.engine_source
    if source is None or source.kind != EngineSource.Kind.GIT:
        return {"kind": "installed"}
    commit = run.commit if is_full_sha(run.commit) else ""
    return {"kind": "git", "repo": source.repo_url, "ref": run.ref or source.default_ref or commit, "commit": commit}


def run_spec(run: Run) -> dict:
    """The plain-JSON job a GPU worker executes (runners.contract.JobSpec): no model instances
    cross the broker. The worker resolves the ref; the web side has no git."""
    benchmark, variant = run.benchmark, run.variant
    return JobSpec.from_dict({
        "run_id": run.id,
        "model": benchmark.model,
        "tensor_parallel_size": benchmark.tensor_parallel_size,
        "engine_args": [*benchmark.engine_args, *variant.flags],
        "engine_env": {**benchmark.engine_env, **variant.env},
        "prompt": benchmark.prompt,
        "max_tokens": benchmark.max_tokens,
        "repeats": run.repeats or benchmark.repeats,
        "warmup": benchmark.warmup,
        "startup_timeout_s": benchmark.startup_timeout_s,
        "engine": _engine_spec(run),
        "patches": _patch_specs(run),
    }).to_dict()


def patch_create(*, name: str, content: str) -> Patch:
    """A patch uploaded with a trigger; the same content is stored once."""
    existing = Patch.objects.filter(sha256=patch_sha256(content), name=name).first()
    return existing or Patch.objects.create(name=name, content=content)


def enqueue_run(run_id: int, queue: str = "") -> None:
    """Send the run to its benchmark's pool queue, or to QUEUE (one host's queue of that pool,
    runners.hostinfo.host_queue)."""
    from benchsite.celery import app

    run = Run.objects.select_related("benchmark", "variant").get(id=run_id)
    limit = run.benchmark.time_limit_s
    result = app.send_task(
        "bench.execute_run",
        args=[run.id, run_spec(run)],
        kwargs={"batch": str(run.batch)},  # the worker's comm health check runs once per batch
        queue=queue or run.benchmark.queue,
        soft_time_limit=limit,
        time_limit=limit + 120,  # the soft limit stops the engine cleanly first
    )
    Run.objects.filter(id=run.id, task_id="").update(task_id=result.id)


def runs_trigger(*, benchmark: Benchmark, trigger: str, user=None, variants=None, commit: str = "", ref: str = "",
                 patches=(), queue: str = "", repeats: int | None = None) -> list[Run]:
    """Create one QUEUED run per variant (the whole ladder by default), enqueued once committed
    (to `queue` when given: one host of the pool, see enqueue_run).

    `ref` is what was asked for (branch, tag or commit; the worker resolves it), `commit` a full
    SHA when the caller knows it (a push); `patches` (Patch rows) go on top of the variant's;
    `repeats` overrides the benchmark's timed repeats for these runs (None: the benchmark's)."""
    chosen = list(variants) if variants is not None else list(benchmark.variants.all())
    if not chosen:
        raise TriggerError(f"benchmark {benchmark.name!r} has no variants to run")
    foreign = [v.name for v in chosen if v.benchmark_id != benchmark.id]
    if foreign:
        raise TriggerError(f"variants {foreign} do not belong to {benchmark.name!r}")
    source = benchmark.engine_source
    if (ref or commit) and (source is None or source.kind != EngineSource.Kind.GIT):
        raise TriggerError(f"benchmark {benchmark.name!r} runs the installed engine: it has no repository "
                           "to take a ref or commit from")
    try:
        for given in filter(None, (ref, commit)):
            check_ref(given)
    except SpecError as exc:
        raise TriggerError(str(exc)) from None
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int)
                                or not 1 <= repeats <= Run.MAX_REPEATS):
        raise TriggerError(f"repeats={repeats!r}: give a whole number from 1 to {Run.MAX_REPEATS}")
    batch = uuid.uuid4()
    with transaction.atomic():
        runs = [
            Run.objects.create(
                benchmark=benchmark,
                variant=variant,
                batch=batch,
                trigger=trigger,
                triggered_by=user if user is not None and user.is_authenticated else None,
                commit=commit,
                ref=ref or commit,
                repeats=repeats,
            )
            for variant in sorted(chosen, key=lambda v: v.position)
        ]
        for run in runs:
            run.patches.set(patches)
            transaction.on_commit(partial(enqueue_run, run.id, queue))
    return runs


def run_claim(*, run_id: int, task_id: str, worker_host: str, attempt: int = 0) -> bool:
    """Atomically take a QUEUED run for one worker; False if cancelled or already taken.

    ATTEMPT > 0: a retry of the same task after its claim went unanswered (web side or database
    away). That earlier claim may have landed since, leaving the run claimed by a task execution
    that gave up: the retry takes it over while nothing has started. A second delivery of one
    message (same task id, same attempt) still gets False."""
    now = timezone.now()
    claimed = Run.objects.filter(id=run_id, state=Run.State.QUEUED).update(
        state=Run.State.BUILDING,
        task_id=task_id,
        worker_host=worker_host[:200],
        phase="claimed",
        started_at=now,
        heartbeat_at=now,
    )
    if claimed or attempt < 1:
        return claimed == 1
    taken = Run.objects.filter(id=run_id, state=Run.State.BUILDING, task_id=task_id, phase="claimed").update(
        worker_host=worker_host[:200], heartbeat_at=now)
    if taken:
        log.warning("run %s: an earlier claim of task %s landed late; its retry %d takes the run", run_id, task_id,
                    attempt)
    return taken == 1


def run_progress(*, run_id: int, phase: str, state: str | None = None, task_id: str = "") -> None:
    """Heartbeat and phase from the worker; ignored once the run is final, or when it comes from
    an execution that is no longer the run's (`task_id`, sent by current workers)."""
    changes = {"phase": phase[:100], "heartbeat_at": timezone.now()}
    if state is not None:
        if state not in Run.ACTIVE_STATES:
            raise ValueError(f"a worker cannot move a run to {state}")
        changes["state"] = state
    runs = Run.objects.filter(id=run_id, state__in=Run.ACTIVE_STATES)
    (runs.filter(task_id=task_id) if task_id else runs).update(**changes)


def _stale_execution(run: Run, task_id: str) -> bool:
    """A message of an execution the run no longer belongs to (re-queued after a lost worker)."""
    if task_id and run.task_id and task_id != run.task_id:
        log.warning("message for run %s from task %s ignored: the run belongs to task %s", run.id, task_id,
                    run.task_id)
        return True
    return False


def _artifact_ref(run: Run, artifact: dict) -> dict:
    """A stored file's reference: checked when a worker wrote it, written here when inline."""
    if "file" in artifact:
        problem = artifact_store.ref_problem(artifact, run.id)
        return {"error": problem} if problem else artifact
    if "content" in artifact:  # an import, or an older worker's small probe JSON
        try:
            return artifact_store.store_content(artifact["content"], run_id=run.id, kind=artifact["kind"],
                                                name=artifact["name"])
        except artifact_store.ArtifactError as exc:
            return {"error": str(exc)}
    if artifact.get("path"):
        return {"error": f"artifact {artifact['name']} not stored: it stayed on the GPU host at {artifact['path']}"}
    return {"error": artifact.get("error") or f"artifact {artifact['name']} not stored"}


def _store_artifacts(run: Run, artifacts: list[dict]) -> None:
    """One row per artifact: its stored file, or the reason it has none (the run's other results
    land either way)."""
    for artifact in artifacts:
        ref = _artifact_ref(run, artifact)
        if ref.get("error"):
            log.warning("run %s: %s", run.id, ref["error"])
        Artifact.objects.create(run=run, kind=artifact["kind"], name=artifact["name"][:200], file=ref.get("file", ""),
                                size=ref.get("size", 0), sha256=ref.get("sha256", ""), error=ref.get("error", "")[:2000])


def _discard_artifacts(run_id: int, artifacts: list[dict] | None) -> None:
    """Files written for a result that is ignored (late, or of a stale execution) are deleted."""
    for artifact in artifacts or []:
        if isinstance(artifact.get("file"), str) and artifact["file"].startswith(artifact_store.run_prefix(run_id)):
            artifact_store.delete(artifact["file"])


def artifact_create(*, run: Run, kind: str, name: str, content: str | bytes) -> Artifact:
    """Store CONTENT in the artifact storage as an artifact of RUN (ArtifactError if it cannot)."""
    ref = artifact_store.store_content(content, run_id=run.id, kind=kind, name=name)
    return Artifact.objects.create(run=run, kind=kind, name=name[:200], file=ref["file"], size=ref["size"],
                                   sha256=ref["sha256"])


def _sample_flags(m: dict) -> list[str]:
    """The probe's flag per repeat ('' clean, else why it stays out of every statistic); flags that
    do not line up with the samples are dropped (an older worker sends none)."""
    flags, samples = m.get("sample_flags"), m.get("samples", [])
    if not isinstance(flags, list) or len(flags) != len(samples):
        return []
    return [str(f or "")[:40] for f in flags]


def _record_build(run: Run, build: dict | None) -> None:
    """What the worker built (path, resolved commit, version, duration) as the run's Build; the
    resolved commit becomes the run's `commit` (its `ref` keeps what was asked for)."""
    if not build:
        return
    record = Build.objects.create(
        source=run.benchmark.engine_source,
        path=build.get("path", "") if build.get("path") in BUILD_PATHS else "",
        repo_url=build.get("repo", "")[:500],
        ref=build.get("ref", "")[:250],
        commit=build.get("commit", "")[:64],
        base_commit=build.get("base_commit", "")[:64],
        cache_key=build.get("cache_key", "")[:64],
        cache_hit=build.get("cache_hit"),
        engine_version=(build.get("engine_version") or "")[:100],
        duration_s=build.get("duration_s"),
    )
    record.patches.set(Patch.objects.filter(sha256__in=build.get("patches", [])))
    run.build = record
    if is_full_sha(record.commit):
        run.commit = record.commit
    run.save(update_fields=["build", "commit"])


def run_complete(*, run_id: int, result: dict, task_id: str = "") -> bool:
    """Store a worker's result and finish the run; False if the run was no longer active."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.state not in Run.ACTIVE_STATES or _stale_execution(run, task_id):
            if run.state not in Run.ACTIVE_STATES:
                log.warning("result for run %s ignored: it is %s", run_id, run.state)
            transaction.on_commit(partial(_discard_artifacts, run_id, result.get("artifacts")))
            return False
        for m in result.get("measurements", []):
            Measurement.objects.update_or_create(
                run=run,
                metric=m["metric"],
                defaults={
                    "value": m["value"],
                    "unit": m.get("unit", ""),
                    "direction": m.get("direction", Measurement.Direction.NONE),
                    "samples": m.get("samples", []),
                    "sample_flags": _sample_flags(m),
                    "ci_low": m.get("ci_low"),
                    "ci_high": m.get("ci_high"),
                    "details": m.get("details", {}),
                },
            )
        _store_artifacts(run, result.get("artifacts", []))
        _record_build(run, result.get("build"))
        if result.get("host"):
            run.host_info = result["host"]
            run.host_fingerprint = hostinfo.fingerprint(result["host"])[:300]
        run.state = Run.State.SUCCEEDED
        run.phase = "done"
        run.finished_at = run.heartbeat_at = timezone.now()
        run.took_effect = result.get("took_effect") if isinstance(result.get("took_effect"), dict) else {}
        run.save(update_fields=["state", "phase", "finished_at", "heartbeat_at", "took_effect", "host_info",
                                "host_fingerprint"])
    correctness_judge(run=run)
    runs_compare_comm_ab(run=run)
    transaction.on_commit(partial(run_finished.send, sender=Run, run_id=run.id))
    return True


def run_fail(*, run_id: int, error: str, artifacts: list[dict] | None = None, failure_kind: str = "",
             build: dict | None = None, task_id: str = "") -> bool:
    """Fail a run that is not final yet, keeping what the worker sent (its log tail above all),
    where it failed (`failure_kind`, one of contract.FAILURE_KINDS) and what it had built."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.is_final or _stale_execution(run, task_id):
            if run.is_final:
                log.warning("failure for run %s ignored: it is %s (%s)", run_id, run.state, error[:200])
            transaction.on_commit(partial(_discard_artifacts, run_id, artifacts))
            return False
        _store_artifacts(run, artifacts or [])
        _record_build(run, build)
        run.state = Run.State.FAILED
        run.error = error
        run.failure_kind = failure_kind if failure_kind in FAILURE_KINDS else Run.FailureKind.WORKER
        run.finished_at = timezone.now()
        run.save(update_fields=["state", "error", "failure_kind", "finished_at"])
        transaction.on_commit(partial(run_finished.send, sender=Run, run_id=run.id))
    return True


def run_cancel(*, run: Run) -> bool:
    """Cancel a run that has not finished; a running one has its task terminated."""
    from benchsite.celery import app

    updated = Run.objects.filter(id=run.id, state__in=[Run.State.QUEUED, *Run.ACTIVE_STATES]).update(
        state=Run.State.CANCELLED, finished_at=timezone.now(), phase="cancelled"
    )
    if updated and run.task_id and run.state in Run.ACTIVE_STATES:
        # SIGTERM ends the task's process; the engine, in its own process group, dies with it
        # (runners.engine sets the parent-death signal).
        app.control.revoke(run.task_id, terminate=True, signal="SIGTERM")
    run.refresh_from_db()
    return bool(updated)


def reaper_listening_since(*, now=None):
    """Record a reaper tick; return since when the web side has been hearing heartbeats.

    A gap between ticks longer than half the heartbeat timeout (at least two reaper intervals)
    means the database or the web worker was away: heartbeats sent meanwhile still wait in the
    queue (retried with backoff), so silence before now proves nothing."""
    now = now or timezone.now()
    gap = timedelta(seconds=max(2 * settings.BENCH_REAPER_INTERVAL_S, settings.BENCH_HEARTBEAT_TIMEOUT_S / 2))
    with transaction.atomic():
        state, created = ReaperState.objects.select_for_update().get_or_create(
            id=1, defaults={"last_tick_at": now, "listening_since": now})
        if not created:
            if now - state.last_tick_at > gap:
                log.warning("reaper: no tick for %d s (database or web worker away): heartbeats are judged "
                            "from now on", (now - state.last_tick_at).total_seconds())
                state.listening_since = now
            state.last_tick_at = now
            state.save(update_fields=["last_tick_at", "listening_since"])
    return state.listening_since


def runs_reap_stale(*, now=None, listening_since=None) -> int:
    """Fail active runs whose worker stopped sending heartbeats (killed worker, lost host); with
    BENCH_REAPER_REQUEUE, a run on its first attempt is queued again instead. With
    LISTENING_SINCE (reaper_listening_since), only a silence heard for a whole timeout counts."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.BENCH_HEARTBEAT_TIMEOUT_S)
    if listening_since is not None and listening_since > cutoff:
        return 0
    reaped = 0
    for run in Run.objects.filter(state__in=Run.ACTIVE_STATES, heartbeat_at__lt=cutoff):
        age = int((now - run.heartbeat_at).total_seconds())
        message = (
            f"no heartbeat from worker {run.worker_host or '?'} for {age} s during phase "
            f"{run.phase!r}: the worker or its host was lost"
        )
        if settings.BENCH_REAPER_REQUEUE and run_requeue(run_id=run.id, reason=message, cutoff=cutoff):
            reaped += 1
            continue
        reaped += run_fail(run_id=run.id, error=message, failure_kind=Run.FailureKind.WORKER)
    return reaped


def run_requeue(*, run_id: int, reason: str, cutoff) -> bool:
    """Put a run whose worker was lost back in the queue, once (`attempts`); a message from the
    lost execution is ignored afterwards (its task id is no longer the run's)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.state not in Run.ACTIVE_STATES or run.attempts > 1 or not run.heartbeat_at or run.heartbeat_at >= cutoff:
            return False
        log.warning("run %s re-queued: %s", run.id, reason)
        Run.objects.filter(id=run.id).update(
            state=Run.State.QUEUED, attempts=run.attempts + 1, task_id="", worker_host="", started_at=None,
            heartbeat_at=None, phase=f"re-queued: {reason}"[:100])
        transaction.on_commit(partial(enqueue_run, run.id))
    return True


def runs_requeue_lost(*, now=None) -> int:
    """Send again the QUEUED runs whose message the broker no longer holds (a Redis restarted
    without its data). The database is the source of truth; the claim is conditional, so a
    message that was in flight after all only costs a skipped duplicate."""
    from benchsite.celery import app

    from .broker import live_task_ids

    cutoff = (now or timezone.now()) - timedelta(seconds=settings.BENCH_REQUEUE_LOST_AFTER_S)
    waiting = list(Run.objects.filter(state=Run.State.QUEUED, created_at__lt=cutoff).select_related("benchmark"))
    if not waiting:
        return 0
    live = live_task_ids(app.conf.broker_url, {run.benchmark.queue for run in waiting})
    if live is None:
        return 0
    lost = [run for run in waiting if run.task_id not in live]
    for run in lost:
        log.warning("run %s is QUEUED but its message %s is gone from the broker: sent again", run.id,
                    run.task_id or "(none)")
        if Run.objects.filter(id=run.id, state=Run.State.QUEUED, task_id=run.task_id).update(task_id=""):
            enqueue_run(run.id)
    return len(lost)


def variant_create(*, benchmark: Benchmark, name: str, flags=(), env=None, is_reference=False) -> Variant:
    position = (benchmark.variants.order_by("-position").values_list("position", flat=True).first() or 0) + 1
    return Variant.objects.create(
        benchmark=benchmark, position=position, name=name, flags=list(flags), env=dict(env or {}), is_reference=is_reference
    )


LADDER_FORMAT = "decode-bench-ladder/1"


def runs_import(*, data: dict, gpu_pool: str = "imported") -> list[Run]:
    """Load a `runners ladder` result file (an offline GPU host's runs) as one batch."""
    if data.get("format") != LADDER_FORMAT:
        raise ValueError(f"not a ladder result file (format {data.get('format')!r}, expected {LADDER_FORMAT!r})")
    spec = data["benchmark"]
    batch = uuid.uuid4()
    host = data.get("host", {}).get("hostname", "")
    runs = []
    with transaction.atomic():
        benchmark, _ = Benchmark.objects.get_or_create(
            slug=spec["slug"],
            defaults={
                "name": spec.get("name", spec["slug"]),
                "description": spec.get("description", ""),
                "model": spec["model"],
                "tensor_parallel_size": spec.get("tensor_parallel_size", 1),
                "gpu_pool": gpu_pool,
                "prompt": spec.get("prompt", ""),
                "max_tokens": spec.get("max_tokens", 128),
                "repeats": spec.get("repeats", 5),
                "warmup": spec.get("warmup", 1),
                "engine_args": spec.get("engine_args", []),
                "engine_env": spec.get("engine_env", {}),
            },
        )
        for entry in data["runs"]:
            v = entry["variant"]
            variant = benchmark.variants.filter(name=v["name"]).first() or variant_create(
                benchmark=benchmark, name=v["name"], flags=v.get("flags", []), env=v.get("env", {}),
                is_reference=v.get("is_reference", False),
            )
            run = Run.objects.create(
                benchmark=benchmark, variant=variant, batch=batch, trigger=Run.Trigger.IMPORT,
                state=Run.State.RUNNING, worker_host=host, phase="imported",
                started_at=_from_epoch(entry.get("started_at")), heartbeat_at=timezone.now(),
            )
            if entry["state"] == "SUCCEEDED":
                run_complete(run_id=run.id, result=entry["result"])
            else:
                run_fail(run_id=run.id, error=entry.get("error", "failed"), artifacts=entry.get("artifacts", []))
            Run.objects.filter(id=run.id).update(finished_at=_from_epoch(entry.get("finished_at")) or timezone.now())
            runs.append(run)
        _import_builds_on(benchmark, [*data.get("variants", []), *(entry["variant"] for entry in data["runs"])])
    return runs


def _import_builds_on(benchmark: Benchmark, specs: list[dict]) -> None:
    """A ladder file's `builds_on` (another variant's name): the step each variant builds on in
    the waterfall. A name that is not a variant of the benchmark fails the whole import."""
    by_name = {v.name: v for v in benchmark.variants.all()}
    for spec in specs:
        base, variant = spec.get("builds_on"), by_name.get(spec.get("name"))
        if not base or variant is None:
            continue
        if base not in by_name or base == variant.name:
            raise ValueError(f"variant {variant.name!r} builds_on {base!r}: not another variant of {benchmark.slug} "
                             f"(variants: {sorted(by_name)})")
        if variant.builds_on_id != by_name[base].pk:
            variant.builds_on = by_name[base]
            variant.save(update_fields=["builds_on"])


def _from_epoch(seconds):
    return datetime.fromtimestamp(seconds, tz=dt_timezone.utc) if seconds else None
