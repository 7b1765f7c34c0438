"""Pull-request checks, measured on the real service: how fast a PR gets its check, how long a
comparison takes on the CPU engine, and the smallest slowdown a comparison finds.

    python benchmarks/pr_checks.py [--starts-per-side 2] [--noise-starts 10] [--json]
    python benchmarks/pr_checks.py --resample FILE.json [--json]   # {"starts": [tok/s of each engine start]}
    python benchmarks/pr_checks.py --resample docs/data/pr-checks-h200.json --json   # resampling.service_rule

The service runs as in production: gunicorn (one worker) on a PostgreSQL database of its own
(created on --postgres and dropped after), a private Redis as broker, a real web-queue Celery
worker and a real GPU worker of pool `cpu` running `vllm serve` (the CPU build on the tiny
model), a git repository of the installed vLLM's Python tree, and GitHub's API played by a
local server (a GitHub App: installation token, check runs).

- delivery_to_queued_check_s: from the signed `opened` delivery to the check run created with
  status "queued" at GitHub (the web worker's report task).
- delivery_to_engine_start_s: from the delivery to the first run's phase "starting engine" on
  an idle GPU worker (claim, resolving the merge base, the overlay build).
- comparison_s: from the delivery to the comparison judged (`--starts-per-side` engine starts a
  side, base, head, base, head, then one more a side while undecided, up to the service's cap or
  `--max-starts-per-side`), with its outcome and starts used: an A/A (head and base the same code),
  then a head whose Llama model sleeps a ninth of the A/A's decode step more per step (10% slower).
- smallest slowdown: an A/A PR with `--noise-starts` engine starts a side gives a pool of
  per-start decode figures; comparisons of `--starts-per-side` starts a side are drawn from it
  (with replacement), the head's figures slowed by s, and judged with one look and a fixed 3%
  threshold, as the service judged before adaptive starts. The smallest s found in at least 95%
  of the draws, with the A/A false-alarm rate (s = 0), is printed; and the statistical floor
  (the same with no threshold).
- service_rule: the service's own rule (adaptive starts, Pocock's level, the threshold from the
  series' noise) on comparisons drawn without replacement, the series' noise estimated from the
  starts each comparison leaves (service_rule below).
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECRET = "pr-checks-secret"
SLOWDOWNS = [i / 1000 for i in range(0, 50, 2)] + [i / 100 for i in range(5, 61)]


# --- the resampling: pure -------------------------------------------------------------------


def detection_rate(pool: list[float], *, per_side: int, slowdown: float, threshold: float, trials: int,
                   rng: random.Random) -> tuple[float, float]:
    """(share of draws judged regressed, share judged improved or regressed at all) for comparisons
    of PER_SIDE starts a side drawn from POOL, the head slowed by SLOWDOWN."""
    from benchsite.integrations.pulls.comparison import Side, metric_change

    regressed = alarms = 0
    for _ in range(trials):
        base = [Side(run_id=i, state="SUCCEEDED", figures={"decode_tok_s": rng.choice(pool)}) for i in range(per_side)]
        head = [Side(run_id=i, state="SUCCEEDED", figures={"decode_tok_s": rng.choice(pool) * (1 - slowdown)})
                for i in range(per_side)]
        word = metric_change("decode_tok_s", base, head, threshold)["word"]
        regressed += word == "regressed"
        alarms += word in ("regressed", "improved")
    return regressed / trials, alarms / trials


def smallest_slowdown(pool: list[float], *, per_side: int, threshold: float, trials: int = 1000,
                      seed: int = 0) -> dict:
    """The smallest slowdown found in >= 95% of the draws, and the A/A false-alarm rate."""
    rng = random.Random(seed)
    _, false_alarms = detection_rate(pool, per_side=per_side, slowdown=0.0, threshold=threshold, trials=trials,
                                     rng=rng)
    found = None
    for s in SLOWDOWNS[1:]:
        rate, _ = detection_rate(pool, per_side=per_side, slowdown=s, threshold=threshold, trials=trials, rng=rng)
        if rate >= 0.95:
            found = s
            break
    return {"per_side": per_side, "threshold": threshold, "trials": trials, "aa_false_alarm_rate": false_alarms,
            "smallest_slowdown_95": found}


def service_rule(pool: list[float], *, first: int, cap: int, trials: int = 1000, seed: int = 0) -> dict:
    """The service's adaptive rule (integrations/pulls/comparison.headline_check: FIRST starts a
    side, one more while undecided, up to CAP; Pocock's level per look; the threshold from the
    series' noise) over TRIALS comparisons per slowdown, each drawn from POOL without replacement:
    CAP starts a side, the series' noise estimated from the starts left (same code) when at least
    sensitivity.MIN_STARTS are left (else CAP shrinks to leave them; when the pool cannot, the
    noise stays unknown, as on a new series)."""
    from benchsite.integrations.pulls.comparison import HEADLINE, headline_check
    from benchsite.regressions.detect.sensitivity import MIN_STARTS, bound, noise_estimate

    room = (len(pool) - MIN_STARTS) // 2
    with_noise = room >= max(first, 2)
    cap = min(cap, room if with_noise else len(pool) // 2)
    rng, starts_used = random.Random(seed), []

    def judged(slowdown: float) -> list[str]:
        found = []
        for _ in range(trials):
            drawn = rng.sample(pool, len(pool))
            base, head, rest = drawn[:cap], [v * (1 - slowdown) for v in drawn[cap:2 * cap]], drawn[2 * cap:]
            noise = noise_estimate([("same code", v) for v in rest]) if with_noise else None
            change, used = headline_check(base, head, first=min(first, cap), cap=cap,
                                          threshold=bound(HEADLINE, noise=noise).relative, noise=noise)
            found.append(change["word"])
            starts_used.append(used)
        return found

    same = judged(0.0)
    smallest = next((s for s in SLOWDOWNS[1:] if judged(s).count("regressed") >= 0.95 * trials), None)
    return {"starts_per_side": first, "max_starts_per_side": cap, "trials": trials,
            "noise_from_other_starts": with_noise,
            "aa_false_alarm_rate": sum(w in ("regressed", "improved") for w in same) / trials,
            "smallest_slowdown_95": smallest,
            "mean_starts_per_side": round(sum(starts_used) / len(starts_used), 3)}


def resample_report(pool: list[float], per_side: int, trials: int = 1000, max_per_side: int | None = None) -> dict:
    from statistics import fmean, stdev

    from benchsite.integrations.pulls.settings import PullSettings

    cv = stdev(pool) / fmean(pool) if len(pool) > 1 else None
    cap = PullSettings(starts_per_side=per_side, max_starts_per_side=max_per_side).cap()
    return {"starts": len(pool), "cv_across_starts": cv,
            "with_threshold": smallest_slowdown(pool, per_side=per_side, threshold=0.03, trials=trials),
            "statistical_floor": smallest_slowdown(pool, per_side=per_side, threshold=0.0, trials=trials),
            "service_rule": service_rule(pool, first=per_side, cap=cap, trials=trials)}


# --- the service ----------------------------------------------------------------------------


def _repository(tmp: Path):
    """The installed vLLM's Python tree at tag v0.32.0 on main, served as file://."""
    from tests.runners.builder.conftest import BASE_TAG, Remote, installed_vllm

    (tmp / "repo").mkdir()
    remote = Remote(tmp / "repo")
    src = installed_vllm()
    for py in src.rglob("*.py"):
        dest = remote.work / "vllm" / py.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(py, dest)
    remote.base = remote.commit({"README.md": "vLLM Python tree\n"}, "base")
    remote.tag(BASE_TAG)
    return remote


def _django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _setup(repo_url: str, model: str) -> None:
    from benchsite.bench.models import Benchmark, EngineSource
    from benchsite.integrations.models import RepoWatch

    source = EngineSource.objects.create(name="vllm", kind="git", repo_url=repo_url, default_ref="main")
    benchmark = Benchmark.objects.create(
        name="tiny", slug="tiny", model=model, engine_source=source, max_tokens=64, repeats=3, warmup=1,
        startup_timeout_s=300, engine_args=["--enforce-eager", "--dtype", "float32", "--max-model-len", "512",
                                            "--max-num-seqs", "2"])
    benchmark.variants.create(position=1, name="eager", is_reference=True)
    watch = RepoWatch.objects.create(repo_url="https://github.com/vllm-project/vllm", branches=["main"],
                                     secret_env="BENCH_PR_CHECKS_SECRET")
    watch.benchmarks.set([benchmark])


def _deliver(url: str, number: int, head: str) -> float:
    from tests.benchsite.integrations.conftest import sign
    from tests.benchsite.integrations.pulls.events import github_pull_request

    body = json.dumps(github_pull_request("opened", number=number, head=head)).encode()
    t0 = time.monotonic()
    response = httpx.post(url, content=body, timeout=60, headers={
        "Content-Type": "application/json", "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": sign(body, SECRET)})
    if response.status_code != 202:
        raise SystemExit(f"delivery refused: {response.status_code} {response.text}")
    return t0


def _until(predicate, timeout_s: float, what: str, interval_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval_s)
    raise SystemExit(f"timed out waiting for {what}")


LLAMA = "vllm/model_executor/models/llama.py"
LOGITS = """        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits
"""


def _slower_llama(remote, sleep_s: float) -> dict:
    """The installed Llama model file with SLEEP_S more per decode step."""
    text = (remote.work / LLAMA).read_text()
    if LOGITS not in text:
        raise SystemExit(f"{LLAMA}: the compute_logits lines to slow down are not there")
    return {LLAMA: text.replace(LOGITS, LOGITS.replace("        return logits", (
        f"        __import__('time').sleep({sleep_s!r})  # pr_checks.py: a slower head\n        return logits")))}


def _pr(url: str, github, remote, number: int, per_side: int, timeout_s: float, cap: int | None = None,
        files: dict | None = None) -> dict:
    """One pull request through the service (an A/A unless FILES change the head); its timings,
    outcome, starts used and per-start figures."""
    from benchsite.bench.models import Run
    from benchsite.integrations.models import Comparison, RepoWatch

    RepoWatch.objects.update(pull_requests={"starts_per_side": per_side, "max_starts_per_side": cap})
    remote.reset_to(remote.base)
    head = remote.commit(files or {f"vllm/bench_pr_{number}.py": f"PR = {number}\n"}, f"PR {number}",
                         branch=f"perf/{number}")
    t0 = _deliver(url, number, head)
    queued = _until(lambda: any(r["method"] == "POST" and r["path"].endswith("/check-runs") and
                                r["json"].get("head_sha") == head for r in github.requests) and time.monotonic(),
                    60, "the queued check run")

    def engine_starting():
        return Run.objects.filter(pull_run__comparison__pull__number=number, phase="starting engine").exists()

    engine = _until(lambda: engine_starting() and time.monotonic(), timeout_s, "the first engine start", 0.1)
    comparison = _until(lambda: Comparison.objects.filter(pull__number=number, state="done").first(), timeout_s,
                        "the comparison", 0.5)
    done = time.monotonic()
    figures = {role: [] for role in ("base", "head")}
    for pull_run in comparison.pull_runs.select_related("run"):
        m = pull_run.run.measurements.filter(metric="decode_tok_s").first()
        if m is not None:
            figures[pull_run.role].append(m.value)
    return {"number": number, "per_side": per_side, "max_per_side": comparison.max_starts_per_side,
            "starts_used": comparison.rounds, "delivery_to_queued_check_s": round(queued - t0, 3),
            "delivery_to_engine_start_s": round(engine - t0, 2), "comparison_s": round(done - t0, 1),
            "outcome": comparison.outcome, "summary": comparison.summary, "figures": figures}


def _service(args, tmp: Path, redis, database_url: str, github, key_pem: str) -> dict:
    from tests.conftest import Workers
    from tests.faults.harness import free_port

    remote = _repository(tmp)
    model = os.environ.get("BENCH_TINY_MODEL_DIR") or str(ROOT / "var" / "tiny-model")
    port = free_port()
    os.environ.update({"CELERY_BROKER_URL": redis.url, "CELERY_RESULT_BACKEND": redis.url,
                       "BENCH_PR_CHECKS_SECRET": SECRET, "BENCH_GITHUB_API_URL": github.url,
                       "BENCH_GITHUB_APP_ID": "4242", "BENCH_GITHUB_APP_PRIVATE_KEY": key_pem,
                       "BENCH_GITHUB_TOKEN": "", "BENCH_ALLOW_FILE_REPOS": "1", "BENCH_VLLM_BASE_REF": "v0.32.0",
                       "BENCH_LOG_LEVEL": "WARNING", "BENCH_HEARTBEAT_INTERVAL_S": "2"})
    _setup(remote.url, model)
    workers = Workers(redis.url, database_url, tmp, pool="cpu")
    gunicorn = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "--bind", f"127.0.0.1:{port}",
                                 "--workers", "1", "--log-level", "warning"], cwd=ROOT, env={**os.environ},
                                stdout=open(tmp / "gunicorn.log", "wb"), stderr=subprocess.STDOUT)
    try:
        workers.start("web", "web")
        workers.start("gpu", "gpu.cpu")
        from benchsite.bench.models import PoolWorker

        _until(lambda: PoolWorker.objects.filter(pool="cpu").exists(), 120, "the GPU worker's heartbeat", 0.5)
        url = f"http://127.0.0.1:{port}/webhooks/github/"
        _until(lambda: _answers(port), 60, "gunicorn", 0.3)
        cap = args.max_starts_per_side
        first = _pr(url, github, remote, 1, args.starts_per_side, args.timeout * 20, cap)
        figures = first["figures"]["base"] + first["figures"]["head"]
        step_s = 1 / (sum(figures) / len(figures))  # a ninth of a step more: 10% fewer tok/s
        slower = _pr(url, github, remote, 3, args.starts_per_side, args.timeout * 20, cap,
                     files=_slower_llama(remote, step_s / 9))
        noise = _pr(url, github, remote, 2, args.noise_starts, args.timeout * args.noise_starts, args.noise_starts)
    finally:
        gunicorn.terminate()
        workers.stop()
    pool = noise["figures"]["base"] + noise["figures"]["head"]
    return {"pr": {k: v for k, v in first.items() if k != "figures"},
            "slower_pr": {k: v for k, v in slower.items() if k != "figures"},
            "noise_pr": {k: v for k, v in noise.items()},
            "resampling": resample_report(pool, args.starts_per_side, max_per_side=cap)}


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/openapi.json", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def measure(args) -> dict:
    from cryptography.hazmat.primitives.asymmetric import rsa

    from benchmarks.pgdb import private_database

    tmp = Path(tempfile.mkdtemp(prefix="pr-checks-"))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with private_database(args.postgres, "bench_pr_checks") as database_url:
        _django(database_url)  # before the test helpers, which import models
        from tests.benchsite.integrations.pulls.conftest import FakeForge, pem
        from tests.faults.harness import PrivateRedis

        redis = PrivateRedis(tmp)
        redis.start()
        try:
            with FakeForge("/api/v3", public_key=key.public_key()) as github:
                return {"cpu_count": os.cpu_count(), **_service(args, tmp, redis, database_url, github, pem(key))}
        finally:
            redis.kill()


def format_report(figures: dict) -> str:
    lines = []
    if "pr" in figures:
        pr = figures["pr"]
        lines += [f"delivery -> queued check run   {pr['delivery_to_queued_check_s'] * 1000:8.0f} ms",
                  f"delivery -> first engine start {pr['delivery_to_engine_start_s']:8.1f} s"]
        for name, label in (("pr", "A/A"), ("slower_pr", "10% slower head")):
            one = figures[name]
            lines.append(f"{label:16} comparison {one['comparison_s']:8.1f} s, {one['starts_used']} starts a side "
                         f"(began with {one['per_side']}, up to {one['max_per_side']}): {one['outcome']}")
    r = figures["resampling"]
    cv = f"{r['cv_across_starts'] * 100:.2f}%" if r["cv_across_starts"] is not None else "-"
    lines.append(f"pool: {r['starts']} engine starts, CV across starts {cv}")
    for name in ("with_threshold", "statistical_floor"):
        row = r[name]
        lines.append(f"{name:18} ({row['per_side']} a side, threshold {row['threshold'] * 100:g}%): smallest "
                     f"slowdown found 95% of the time {_found(row)}; A/A false alarms "
                     f"{row['aa_false_alarm_rate'] * 100:.1f}%")
    rule = r["service_rule"]
    lines.append(f"{'service_rule':18} ({rule['starts_per_side']} a side, up to {rule['max_starts_per_side']}; noise "
                 f"{'from the other starts' if rule['noise_from_other_starts'] else 'unknown: too few starts'}): "
                 f"smallest slowdown found 95% of the time {_found(rule)}; A/A false alarms "
                 f"{rule['aa_false_alarm_rate'] * 100:.1f}%; {rule['mean_starts_per_side']:.2f} starts a side on average")
    return "\n".join(lines)


def _found(row: dict) -> str:
    return f"{row['smallest_slowdown_95'] * 100:.1f}%" if row["smallest_slowdown_95"] is not None else "> 60%"


def _starts(parser, path: Path) -> list[float]:
    """The engine starts' figures of a --resample file; the parser's error for anything unusable."""
    try:
        starts = json.loads(path.read_text())["starts"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f'--resample {path}: not a JSON file {{"starts": [tok/s, ...]}} ({exc})')
    if not isinstance(starts, list) or not all(isinstance(v, (int, float)) and v > 0 for v in starts):
        parser.error(f"--resample {path}: starts must be a list of positive figures")
    if len(starts) < 4:
        parser.error(f"--resample {path}: {len(starts)} engine starts; resampling needs at least 4 "
                     "(two a side without replacement)")
    return starts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts-per-side", type=int, default=2)
    parser.add_argument("--noise-starts", type=int, default=10, help="engine starts a side of the A/A noise PR")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for one engine start's runs")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--max-starts-per-side", type=int, default=None,
                        help="the service rule's cap (default: the service's, max(6, --starts-per-side))")
    parser.add_argument("--resample", type=Path, help='only resample: a JSON file {"starts": [tok/s, ...]}')
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.starts_per_side < 2:
        parser.error("--starts-per-side must be 2 or more: one start a side gives no interval between starts")
    if args.max_starts_per_side is not None and not args.starts_per_side <= args.max_starts_per_side <= 20:
        parser.error(f"--max-starts-per-side must be from --starts-per-side ({args.starts_per_side}) to 20")
    if args.resample:
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
        import django

        django.setup()
        figures = {"resampling": resample_report(_starts(parser, args.resample), args.starts_per_side,
                                                 max_per_side=args.max_starts_per_side)}
    else:
        figures = measure(args)
    print(json.dumps(figures) if args.json else format_report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
