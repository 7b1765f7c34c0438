"""A soak: the whole service under steady load for minutes, with faults at random times.

    python benchmarks/soak.py --minutes 30 --json      # the figures as one JSON object
    python benchmarks/soak.py --seconds 40 --seed 7    # a short one (the suite runs this)

It starts the service as benchmarks/faults.py does (benchmarks/fault_service.py: a PostgreSQL
database of its own `soak_<pid>`, dropped after; a private Redis; real Celery workers, web with
beat and GPU, on the fake engine tests/faults/fake_engine.py; the workers reach PostgreSQL
through a TCP proxy that can be cut), plus gunicorn with one worker for the pages and webhooks,
and an artifact storage on a tmpfs of its own (needs root). The engine source is a local git
repository: each push is a real new commit that the GPU worker fetches and builds (an overlay).

Load, until the time is up: a signed GitHub push of a new commit every --push-every-s seconds
(round-robin over 3 branches; a later push of a branch supersedes its queued runs), every 4th
one a pull_request `synchronize` of a new head instead (both sides queued); a page reader (home,
benchmark page, chart JSON, run page, run API), 0.2 s between reads. Faults, one of each, in an order
and at times drawn from --seed, within the first 75 % of the time:
  gpu_worker_sigkill  the GPU worker's process group SIGKILLed, restarted 1 s later
  redis_restart       the broker killed (no persistence: every message lost), back after 3 s
  database_cut        the workers' PostgreSQL cut at the proxy for 8 s
  engine_hang         a run whose engine stops sending tokens mid-stream
  disk_full           the artifact storage filled to the last byte until a run finishes on it
After each fault a probe run is triggered; the fault is survived when the probe SUCCEEDED (and,
per fault, what it should show: the killed run failed with its reason, the hang run failed by
the probe deadline, runs finished on the full disk kept their measurements). recovery_s: from
the fault's end (the restart, the reconnection, the freed disk; for engine_hang from the run's
start) to the probe's success.

Pushes and pull-request deliveries come during the load only (--seconds or --minutes), also
when a fault's recovery outlasts it. After the load, a drain (--drain-s at most) until every run
is final. lost: a run that is neither final, nor in flight (RUNNING with a fresh heartbeat), nor
waiting (QUEUED with its message in the broker: a drain cut short) after the drain: must be 0.
Sampled every 5 s: the Redis queue lengths and the RSS of the gunicorn worker and of each Celery
worker (main process and its pool processes; the GPU worker's "end" is the restarted process).
growth.bounded: queues back to 0, no engine process left over, RSS end/start under 1.5 per worker
(the gunicorn worker's and the web Celery worker's; the GPU worker is a fresh process after the
kill). Exit status 0 when nothing was lost, every fault survived and growth is bounded.
"""
import argparse
import contextlib
import hashlib
import hmac
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAULTS = ("gpu_worker_sigkill", "redis_restart", "database_cut", "engine_hang", "disk_full")
SECRET = "soak-secret"
REPO = "https://github.com/acme/engine"
BASE_TAG = "soak-base"
BRANCHES = 3
SAMPLE_EVERY_S = 5.0
RSS_BOUND = 1.5  # end/start: Python workers warm up by importing lazily; a leak keeps climbing
PAGES = ("/", "/b/soak/", "/api/benchmarks/soak/chart/", "/runs/{run}/", "/api/runs/{run}/")


class Clock:
    """Seconds since the soak's start, shared by every record."""

    def __init__(self):
        self.t0, self.wall0 = time.monotonic(), time.time()

    def at(self, moment) -> float | None:
        """A database timestamp on this clock."""
        return round(moment.timestamp() - self.wall0, 2) if moment else None

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)


# --- the service's data -------------------------------------------------------------------------

def _create_benchmarks(remote_url: str):
    """The watched benchmark (git source: pushes and PRs queue it) and one on the installed
    engine for the faults' own runs (probe, hang)."""
    from benchsite.bench.lifecycle import trigger
    from benchsite.bench.models import Benchmark, EngineSource
    from benchsite.integrations.models import RepoWatch

    source = EngineSource.objects.create(name="engine", kind=EngineSource.Kind.GIT, repo_url=remote_url,
                                         default_ref="main")
    common = dict(model="/nonexistent/soak-model", gpu_pool="cpu", prompt="soak", max_tokens=8, repeats=1,
                  warmup=1, startup_timeout_s=90, time_limit_s=180)
    watched = Benchmark.objects.create(name="soak", slug="soak", engine_source=source, **common)
    trigger.variant_create(benchmark=watched, name="eager", is_reference=True)
    faults = Benchmark.objects.create(name="soak-faults", slug="soak-faults", **common)
    trigger.variant_create(benchmark=faults, name="ok")
    trigger.variant_create(benchmark=faults, name="hang", env={"FAKE_ENGINE_MODE": "hang"})
    watch = RepoWatch.objects.create(repo_url=REPO, branches=["*"], secret_env="BENCH_SOAK_WEBHOOK_SECRET",
                                     pull_requests={"starts_per_side": 1})
    watch.benchmarks.add(watched)
    return watched, faults


def _trigger(benchmark, variant: str):
    from benchsite.bench.lifecycle import trigger
    from benchsite.bench.models import Run

    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API,
                                  variants=[benchmark.variants.get(name=variant)])
    return run


# --- load ---------------------------------------------------------------------------------------

def _signed_post(client, url: str, event: str, payload: dict) -> tuple[str, float]:
    import uuid

    import httpx

    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    t0 = time.perf_counter()
    try:
        r = client.post(url, content=body, headers={
            "Content-Type": "application/json", "X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": signature})
        status = str(r.status_code)
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return status, time.perf_counter() - t0


def _repo_payload() -> dict:
    return {"full_name": "acme/engine", "html_url": REPO, "clone_url": REPO + ".git"}


def _deliveries(stop: threading.Event, remote, base_url: str, every_s: float, until_s: float, clock: Clock,
                out: list) -> None:
    """Pushes of new commits at a steady rate during the load (UNTIL_S on CLOCK, also when a fault's
    recovery outlasts it: a slow host then gets no more work than a quick one); every 4th delivery
    a new head of a pull request."""
    import httpx

    from tests.runners.builder.conftest import git

    main_sha = git(remote.work, "rev-parse", "main")
    with httpx.Client(timeout=30) as client:
        i = 0
        while not stop.is_set() and clock.now() < until_s:
            if i % 4 == 3:
                number = i // 4 % 2 + 1
                sha = remote.commit({"soak.txt": f"{i}\n"}, f"pr {number} head {i}", branch=f"pr/{number}")
                repo = _repo_payload()
                payload = {"action": "synchronize", "number": number, "repository": repo, "sender": {"login": "soak"},
                           "pull_request": {"number": number, "title": "soak", "draft": False, "labels": [],
                                            "user": {"login": "soak"}, "html_url": f"{REPO}/pull/{number}",
                                            "head": {"sha": sha, "ref": f"pr/{number}", "repo": repo},
                                            "base": {"ref": "main", "sha": main_sha, "repo": repo}}}
                event = "pull_request"
            else:
                branch = f"perf/b{i % BRANCHES}"
                sha = remote.commit({"soak.txt": f"{i}\n"}, f"push {i}", branch=branch)
                payload = {"ref": f"refs/heads/{branch}", "before": "0" * 40, "after": sha, "deleted": False,
                           "repository": _repo_payload(), "head_commit": {"id": sha, "message": "soak"}}
                event = "push"
            status, latency = _signed_post(client, f"{base_url}/webhooks/github/", event, payload)
            out.append({"t": clock.now(), "event": event, "status": status, "ms": round(latency * 1e3, 1)})
            i += 1
            stop.wait(every_s)


def _reader(stop: threading.Event, base_url: str, clock: Clock, out: list) -> None:
    """One client reading pages back to back: its latencies, tagged with the time they were asked."""
    import httpx
    from django.db import connection

    from benchsite.bench.models import Run

    with httpx.Client(timeout=30) as client:
        i = 0
        while not stop.is_set():
            page = PAGES[i % len(PAGES)]
            i += 1
            if "{run}" in page:
                latest = Run.objects.order_by("-id").values_list("id", flat=True).first()
                if latest is None:
                    continue
                page = page.format(run=latest)
            t, t0 = clock.now(), time.perf_counter()
            try:
                status = str(client.get(base_url + page).status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            out.append({"t": t, "page": re.sub(r"\d+", "N", page), "status": status,
                        "ms": round((time.perf_counter() - t0) * 1e3, 1)})
            stop.wait(0.2)
    connection.close()


def _rss_mb(pid: int | None, children: bool) -> float | None:
    """RSS of PID plus, with CHILDREN, its direct children (a worker's pool processes; the
    engines a GPU job starts are grandchildren and not counted)."""
    import psutil

    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        procs = [proc, *(proc.children() if children else [])]
        return round(sum(p.memory_info().rss for p in procs) / 2**20, 1)
    except psutil.Error:
        return None


def _gunicorn_worker(gunicorn) -> int | None:
    import psutil

    try:
        kids = psutil.Process(gunicorn.pid).children()
    except psutil.Error:
        return None
    return kids[0].pid if kids else None


def _queues(redis_url: str) -> dict:
    """The broker's queue lengths and its unacknowledged messages; {"redis": "down"} without it."""
    import redis as redis_py

    try:
        client = redis_py.Redis.from_url(redis_url, socket_timeout=2)
        try:
            return {**{q: client.llen(q) for q in ("web", "gpu.cpu")}, "unacked": client.hlen("unacked")}
        finally:
            client.close()
    except redis_py.RedisError:
        return {"redis": "down"}


def _leftover_messages(redis_url: str) -> list[dict]:
    """The messages still in the broker (queued or unacknowledged): task, id, args' run id, eta."""
    import redis as redis_py

    def describe(raw: bytes) -> dict:
        message = json.loads(raw)
        if isinstance(message, list):  # an unacked entry: [message, exchange, routing key]
            message = message[0]
        headers = message.get("headers", {})
        return {"task": headers.get("task"), "id": headers.get("id"), "eta": headers.get("eta"),
                "args": str(headers.get("argsrepr", ""))[:40], "retries": headers.get("retries")}

    try:
        client = redis_py.Redis.from_url(redis_url, socket_timeout=2)
        raws = [*client.lrange("web", 0, 20), *client.lrange("gpu.cpu", 0, 20), *client.hvals("unacked")[:20]]
        client.close()
        return [describe(raw) for raw in raws]
    except (redis_py.RedisError, ValueError) as exc:
        return [{"error": str(exc)}]


def _sampler(stop: threading.Event, running, gunicorn, clock: Clock, out: list) -> None:
    from django.db import connection

    from benchsite.bench.models import Run

    while True:
        last = stop.is_set()  # once told to stop: one more sample, the state at the end
        sample = {"t": clock.now(), **_queues(running.redis.url)}
        pids = {"gunicorn_worker": _gunicorn_worker(gunicorn),
                **{f"celery_{name}": proc.pid for name, proc in running.workers.procs.items()}}
        sample["pids"] = pids
        sample["rss_mb"] = {name: _rss_mb(pid, children=name != "gunicorn_worker") for name, pid in pids.items()}
        sample["succeeded"] = Run.objects.filter(state=Run.State.SUCCEEDED).count()
        out.append(sample)
        if last:
            connection.close()
            return
        stop.wait(SAMPLE_EVERY_S)


# --- faults -------------------------------------------------------------------------------------

class Faults:
    """Each fault injected for real, then a probe run that has to succeed."""

    def __init__(self, running, disk, faults_benchmark, clock: Clock, recover_s: float):
        self.running, self.disk, self.benchmark, self.clock = running, disk, faults_benchmark, clock
        self.recover_s = recover_s

    def wait(self, predicate, timeout_s: float):
        """The predicate's value, or None on time-out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.3)
        return None

    def _run(self, run_id: int):
        from benchsite.bench.models import Run

        return Run.objects.get(id=run_id)

    def _probe(self, since: float) -> tuple[bool, float | None, dict]:
        """A run triggered now: (succeeded, seconds from SINCE to its success, what it showed)."""
        probe = _trigger(self.benchmark, "ok")
        done = self.wait(lambda: (lambda r: r if r.is_final else None)(self._run(probe.id)), self.recover_s)
        ok = done is not None and done.state == "SUCCEEDED"
        return ok, round(self.clock.now() - since, 2) if ok else None, {
            "probe_run": probe.id, "probe_state": done.state if done else "not final",
            "probe_error": (done.error[:300] if done and done.error else "")}

    def _in_flight(self):
        from benchsite.bench.models import Run

        return list(Run.objects.filter(state__in=Run.ACTIVE_STATES).values_list("id", flat=True))

    def gpu_worker_sigkill(self) -> dict:
        busy = self.wait(self._in_flight, 60) or []
        injected = self.clock.now()
        self.running.workers.kill("gpu")
        time.sleep(1)
        self.running.workers.start("gpu", "gpu.cpu")
        restored = self.clock.now()
        ended = self.wait(lambda: all(self._run(i).is_final for i in busy), self.recover_s)
        killed = [(r.state, r.failure_kind, r.error[:200]) for r in map(self._run, busy)]
        ok, recovery_s, probe = self._probe(restored)
        return {"injected_at_s": injected, "restored_at_s": restored, "recovery_s": recovery_s,
                "survived": ok and ended is not None,  # the killed runs ended (failed with the reason or re-run)
                "details": {"runs_killed": killed, **probe}}

    def _outage(self, cut, restore, seconds: float) -> dict:
        """CUT a part, wait SECONDS, RESTORE it, then time until a probe run succeeds."""
        injected = self.clock.now()
        cut()
        time.sleep(seconds)
        restore()
        restored = self.clock.now()
        ok, recovery_s, probe = self._probe(restored)
        return {"injected_at_s": injected, "restored_at_s": restored, "recovery_s": recovery_s, "survived": ok,
                "details": probe}

    def redis_restart(self) -> dict:
        return self._outage(self.running.redis.kill, self.running.redis.start, 3)

    def database_cut(self) -> dict:
        return self._outage(self.running.db_proxy.cut, self.running.db_proxy.restore, 8)

    def engine_hang(self) -> dict:
        injected = self.clock.now()
        run = _trigger(self.benchmark, "hang")
        started = self.wait(lambda: self._run(run.id).state != "QUEUED" and self.clock.now(), self.recover_s)
        failed = self.wait(lambda: (lambda r: r if r.is_final else None)(self._run(run.id)), self.recover_s)
        restored = self.clock.now()
        hang_failed = failed is not None and failed.state == "FAILED" and "timeout" in failed.error
        ok, _, probe = self._probe(restored)
        return {"injected_at_s": injected, "restored_at_s": restored,
                "recovery_s": round(restored - started, 2) if started and failed else None,
                "survived": ok and hang_failed,
                "details": {"hang_run": run.id, "hang_state": failed.state if failed else "not final",
                            "hang_error": failed.error[:200] if failed else "", **probe}}

    def disk_full(self) -> dict:
        from benchsite.bench.models import Run

        injected = self.clock.now()
        self.disk.fill()
        run = _trigger(self.benchmark, "ok")  # at least one run finishes on the full disk
        done = self.wait(lambda: (lambda r: r if r.is_final else None)(self._run(run.id)), self.recover_s)
        self.disk.free()
        restored = self.clock.now()
        on_full = Run.objects.filter(id=run.id).first()
        kept = on_full is not None and on_full.state == "SUCCEEDED" and on_full.measurements.exists()
        disk_errors = [a.error[:120] for a in on_full.artifacts.all() if not a.file] if on_full else []
        ok, recovery_s, probe = self._probe(restored)
        probe_run = self._run(probe["probe_run"])
        stored_after = sum(1 for a in probe_run.artifacts.all() if a.file)
        return {"injected_at_s": injected, "restored_at_s": restored, "recovery_s": recovery_s,
                "survived": ok and done is not None and kept and stored_after > 0,
                "details": {"run_on_full_disk": run.id, "state": on_full.state if on_full else None,
                            "measurements_kept": kept, "artifacts_not_stored": len(disk_errors),
                            "artifact_error": disk_errors[0] if disk_errors else "",
                            "artifacts_stored_after": stored_after, **probe}}


def fault_schedule(seed: int, load_s: float, names=FAULTS) -> list[tuple[float, str]]:
    """One time per fault in the first 75 % of the load: the order shuffled and each time drawn
    inside its own slot, both from SEED."""
    rng = random.Random(seed)
    order = list(names)
    rng.shuffle(order)
    slot = 0.75 * load_s / len(order)
    return [(round(i * slot + rng.uniform(0, 0.5 * slot), 1), name) for i, name in enumerate(order)]


# --- figures ------------------------------------------------------------------------------------

def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)


def _drained(first_id: int, redis_url: str) -> bool:
    """Every run final and the broker empty (a superseded run's message is taken and skipped)."""
    from benchsite.bench.models import Run

    if Run.objects.filter(id__gt=first_id).exclude(state__in=Run.FINAL_STATES).exists():
        return False
    return all(v == 0 for v in _queues(redis_url).values())


def _runs_figures(since_id: int, heartbeat_timeout_s: float, clock: Clock, redis_url: str) -> dict:
    from collections import Counter

    from django.utils import timezone

    from benchsite.bench.models import Run
    from benchsite.bench.worker.broker import live_task_ids

    runs = list(Run.objects.filter(id__gt=since_id).select_related("variant", "benchmark")
                .only("state", "trigger", "failure_kind", "error", "heartbeat_at", "phase", "created_at", "started_at",
                      "finished_at", "attempts", "task_id", "variant__name", "benchmark__gpu_pool"))
    fresh = timezone.now() - timezone.timedelta(seconds=heartbeat_timeout_s)
    in_flight = [r for r in runs if r.state in Run.ACTIVE_STATES and r.heartbeat_at and r.heartbeat_at >= fresh]
    queued = [r for r in runs if r.state == Run.State.QUEUED and r.task_id]
    live = live_task_ids(redis_url, {r.benchmark.queue for r in queued}) if queued else set()
    # a drain cut short leaves a backlog: a queued run whose message the broker holds is waiting, not lost
    waiting = [r for r in queued if live and r.task_id in live]
    lost = [r.id for r in runs if not r.is_final and r not in in_flight and r not in waiting]

    def reason(run) -> str:
        return run.failure_kind or (run.error.split(":")[0][:60] if run.error else "no reason given")

    return {
        "runs_triggered": len(runs),
        "runs_finished": sum(r.state == "SUCCEEDED" for r in runs),
        "runs_failed": dict(Counter(reason(r) for r in runs if r.state == "FAILED")),
        # the soak cancels nothing itself: these are queued runs superseded by a later push or PR head
        "runs_cancelled": dict(Counter(f"superseded ({r.trigger})" for r in runs if r.state == "CANCELLED")),
        "failed_runs": [{"id": r.id, "variant": r.variant.name, "failure_kind": r.failure_kind,
                         "error": r.error[:200], "attempts": r.attempts, "created_at_s": clock.at(r.created_at),
                         "started_at_s": clock.at(r.started_at), "finished_at_s": clock.at(r.finished_at)}
                        for r in runs if r.state == "FAILED"],
        "runs_in_flight": len(in_flight),
        "runs_waiting": len(waiting),
        "runs_lost": len(lost),
        "lost_run_ids": lost,
        "lost_runs": [{"id": r.id, "state": r.state, "phase": r.phase, "attempts": r.attempts,
                       "created_at_s": clock.at(r.created_at), "started_at_s": clock.at(r.started_at),
                       "heartbeat_at_s": clock.at(r.heartbeat_at)} for r in runs if r.id in lost],
    }


def _pages_figures(reads: list[dict], windows: list[tuple[float, float]]) -> dict:
    def during(t: float) -> bool:
        return any(a <= t <= b for a, b in windows)

    ok = [r for r in reads if r["status"] == "200"]
    by_page = {}
    for r in ok:
        by_page.setdefault(r["page"], []).append(r["ms"])
    return {"requests": len(reads), "errors": {s: sum(r["status"] == s for r in reads)
                                                for s in sorted({r["status"] for r in reads} - {"200"})},
            "p95_ms": _p95([r["ms"] for r in ok]),
            "p95_ms_during_faults": _p95([r["ms"] for r in ok if during(r["t"])]),
            "p95_ms_outside_faults": _p95([r["ms"] for r in ok if not during(r["t"])]),
            "median_ms": round(statistics.median([r["ms"] for r in ok]), 1) if ok else None,
            "p95_ms_by_page": {page: _p95(ms) for page, ms in sorted(by_page.items())}}


def _rss_growth(samples: list[dict], name: str) -> dict:
    """NAME's RSS: "start" once warm (the first sample after a run succeeded while this process
    was up: the first jobs import most of the code), "mid" and "end", of the process running at
    the end (the GPU worker's restart is a new process)."""
    pid = samples[-1]["pids"].get(name)
    same = [s for s in samples if s["pids"].get(name) == pid and s["rss_mb"].get(name)]
    if not same:
        return {"start": None, "end": None}
    warm = next((s for s in same if s["succeeded"] > same[0]["succeeded"]), same[-1])
    later = same[same.index(warm):]
    figures = {"start": warm["rss_mb"][name], "mid": later[len(later) // 2]["rss_mb"][name],
               "end": later[-1]["rss_mb"][name], "start_at_s": warm["t"], "cold_mb": same[0]["rss_mb"][name]}
    figures["ratio"] = round(figures["end"] / figures["start"], 2)
    return figures


def _growth(samples: list[dict], running) -> dict:
    from tests.faults.harness import process_alive

    up = [s for s in samples if "redis" not in s]
    rss = {name: _rss_growth(samples, name) for name in samples[-1]["rss_mb"]}
    pids = running.workers.engine_pids.read_text().split() if running.workers.engine_pids.exists() else []
    engines_left = sum(process_alive(int(p)) for p in pids)
    queues_end = {q: up[-1].get(q) for q in ("web", "gpu.cpu", "unacked")} if up else {}
    bounded = (all(v == 0 for v in queues_end.values()) and engines_left == 0
               and all(r.get("ratio", 0) < RSS_BOUND for r in rss.values()))
    return {"rss_mb": rss, "queues_at_end": queues_end,
            "queue_max": {q: max((s.get(q) or 0) for s in up) for q in ("web", "gpu.cpu", "unacked")} if up else {},
            "engines_left": engines_left, "rss_bound_ratio": RSS_BOUND, "bounded": bounded}


# --- the soak -----------------------------------------------------------------------------------

def _start_gunicorn(work: Path, database_url: str, broker_url: str, artifacts: Path):
    import httpx

    from tests.faults.harness import free_port

    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url,
           "CELERY_RESULT_BACKEND": broker_url, "BENCH_SOAK_WEBHOOK_SECRET": SECRET, "BENCH_LOG_LEVEL": "WARNING",
           "BENCH_ARTIFACTS_DIR": str(artifacts)}
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "--bind", f"127.0.0.1:{port}",
                             "--workers", "1", "--timeout", "120", "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=open(work / "gunicorn.log", "wb"), stderr=subprocess.STDOUT, process_group=0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
            return proc, f"http://127.0.0.1:{port}"
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"gunicorn did not answer: {(work / 'gunicorn.log').read_text()[-2000:]}")


def soak(args, work: Path, database_url: str) -> dict:
    from benchmarks.fault_service import running_service, setup_django
    from tests.faults.harness import FAULT_ENV, FullDisk
    from tests.faults.scenarios import DATABASE_DOWN_ENV
    from tests.runners.builder.conftest import Remote

    os.environ["BENCH_ALLOW_FILE_REPOS"] = "1"  # the engine source is a local repository
    setup_django(database_url)
    (work / "remote").mkdir()
    remote = Remote(work / "remote")
    remote.commit({"README.md": "soak engine\n"}, "base")
    remote.tag(BASE_TAG)
    _, faults_benchmark = _create_benchmarks(remote.url)
    from benchsite.bench.models import Run

    first_id = Run.objects.order_by("-id").values_list("id", flat=True).first() or 0
    disk = FullDisk(work / "artifacts", size=args.disk_size)
    disk.mount()
    env = {**DATABASE_DOWN_ENV, "BENCH_ARTIFACTS_DIR": str(disk.path), "BENCH_ALLOW_FILE_REPOS": "1",
           "BENCH_VLLM_BASE_REF": BASE_TAG, "BENCH_BUILD_CACHE_DIR": str(work / "build-cache")}
    clock, stop, stop_sampling = Clock(), threading.Event(), threading.Event()
    deliveries, reads, samples, faults = [], [], [], []
    gunicorn = None
    try:
        with running_service(work, database_url, env, proxied=True) as running:
            gunicorn, base_url = _start_gunicorn(work, database_url, running.redis.url, disk.path)
            clock = Clock()
            threads = [threading.Thread(target=_sampler, args=(stop_sampling, running, gunicorn, clock, samples)),
                       threading.Thread(target=_deliveries,
                                        args=(stop, remote, base_url, args.push_every_s, args.load_s, clock,
                                              deliveries)),
                       threading.Thread(target=_reader, args=(stop, base_url, clock, reads))]
            for thread in threads:
                thread.start()
            injector = Faults(running, disk, faults_benchmark, clock, recover_s=args.recover_s)
            for at, name in fault_schedule(args.seed, args.load_s, args.faults):
                time.sleep(max(0.0, at - clock.now()))
                record = {"name": name, "scheduled_at_s": at, **getattr(injector, name)()}
                record["recovered_at_s"] = (round(record["restored_at_s"] + record["recovery_s"], 2)
                                            if record["recovery_s"] is not None and name != "engine_hang"
                                            else (record["restored_at_s"] if record["survived"] else None))
                faults.append(record)
            time.sleep(max(0.0, args.load_s - clock.now()))
            load_s = clock.now()
            stop.set()
            for thread in threads[1:]:
                thread.join(timeout=60)
            drain = injector.wait(lambda: _drained(first_id, running.redis.url), args.drain_s)
            drained_s = round(clock.now() - load_s, 1)
            stop_sampling.set()  # its last sample: the drained queues
            threads[0].join(timeout=30)
            runs = _runs_figures(first_id, float(DATABASE_DOWN_ENV["BENCH_HEARTBEAT_TIMEOUT_S"]), clock,
                                 running.redis.url)
            growth = _growth(samples, running)
            growth["leftover_messages"] = _leftover_messages(running.redis.url)
    finally:
        if gunicorn is not None and gunicorn.poll() is None:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)
        stop.set()
        stop_sampling.set()
        with contextlib.suppress(subprocess.CalledProcessError):
            disk.free()
            subprocess.run(["umount", str(disk.path)], check=True)
    windows = [(f["injected_at_s"], f["recovered_at_s"] or f["restored_at_s"]) for f in faults]
    statuses = {}
    for d in deliveries:
        statuses[d["status"]] = statuses.get(d["status"], 0) + 1
    return {
        "seed": args.seed, "load_s": load_s, "drained": bool(drain), "drain_s": drained_s,
        "heartbeat_timeout_s": float(DATABASE_DOWN_ENV["BENCH_HEARTBEAT_TIMEOUT_S"]),
        "probe_timeout_s": float(FAULT_ENV["BENCH_PROBE_TIMEOUT_S"]),
        **runs,
        "deliveries": {"sent": len(deliveries), "statuses": statuses,
                       "p95_ms": _p95([d["ms"] for d in deliveries])},
        "pages": _pages_figures(reads, windows),
        "faults": faults,
        "faults_injected": len(faults),
        "faults_survived": sum(bool(f["survived"]) for f in faults),
        "growth": growth,
        "queue_lengths": [{k: s[k] for k in ("t", "web", "gpu.cpu", "unacked", "redis") if k in s} for s in samples],
        "rss_mb_samples": [{"t": s["t"], **s["rss_mb"]} for s in samples],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, help="minutes of load (default 30)")
    length.add_argument("--seconds", type=float, help="seconds of load (a short soak)")
    parser.add_argument("--seed", type=int, default=1, help="draws the faults' order and times (default 1)")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"comma-separated, from {','.join(FAULTS)} (a name may repeat; default: each once)")
    parser.add_argument("--push-every-s", type=float, default=20.0, help="seconds between deliveries (default 20)")
    parser.add_argument("--drain-s", type=float, default=300.0, help="at most this long for every run to end")
    parser.add_argument("--recover-s", type=float, default=240.0, help="at most this long for a fault's probe run")
    parser.add_argument("--disk-size", default="64m", help="the artifact storage's tmpfs (default 64m)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432",
                        help="the PostgreSQL server for the soak's own database (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print only the JSON figures")
    args = parser.parse_args()
    args.load_s = 60 * args.minutes if args.minutes is not None else args.seconds if args.seconds is not None else 1800
    args.faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(args.faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown faults {unknown}; choose from {list(FAULTS)}")
    if args.load_s <= 0 or args.push_every_s <= 0:
        parser.error("--minutes/--seconds and --push-every-s must be positive")
    if os.geteuid() != 0:
        parser.error("the disk_full fault mounts a tmpfs: run as root")
    from benchmarks.pgdb import private_database

    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, private_database(args.postgres, "soak") as url:
        figures = soak(args, Path(tmp), url)
    ok = figures["runs_lost"] == 0 and figures["faults_survived"] == len(args.faults) and figures["growth"]["bounded"]
    figures["ok"] = ok
    if args.json:
        print(json.dumps(figures))
    else:
        print(json.dumps({k: v for k, v in figures.items() if k not in ("queue_lengths", "rss_mb_samples")}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
