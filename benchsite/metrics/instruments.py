"""The counters and histograms that processes add to as things happen (the figures read from the
database at scrape time are in collector.py).

Created outside any registry: with PROMETHEUS_MULTIPROC_DIR set (before the process starts),
prometheus_client writes each value to a file there, and the scrape adds up every process's
files (exposition.py); without it, the scrape reads this process's values. Labels take only a
few fixed values (a pool, a phase, a result): never a commit, a run or a delivery id.
"""
from prometheus_client import Counter, Histogram, disable_created_metrics

# No *_created series: multiprocess mode has none either, so one process and many expose the same.
disable_created_metrics()

# Phases last seconds (storing) to an hour or more (a build from source).
PHASE_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)

PHASE_SECONDS = Histogram(
    "decode_bench_phase_duration_seconds", "How long a run's phase took: build, engine_start, probes "
    "(a worker's report) and storing (the web side's transaction).", ["phase", "pool"],
    buckets=PHASE_BUCKETS, registry=None)
RUNS_REAPED = Counter(
    "decode_bench_runs_reaped", "Active runs whose worker went silent, by what the reaper did: failed or requeued.",
    ["action"], registry=None)
WEBHOOK_DELIVERIES = Counter(
    "decode_bench_webhook_deliveries", "Incoming push and pull-request webhook deliveries, by provider and "
    "result: accepted, ignored (2xx, nothing to do), refused (4xx) or error (5xx).", ["provider", "result"],
    registry=None)
FORGE_REPORTS = Counter(
    "decode_bench_forge_reports", "Calls to GitHub's or GitLab's API for pull-request checks (check runs, "
    "statuses, comments), by result: ok, retry (network, 5xx, rate limit) or refused (4xx).", ["result"],
    registry=None)
COMMIT_STATUSES = Counter(
    "decode_bench_commit_statuses", "Commit statuses of pushed runs sent to GitHub, by result: ok, retry or "
    "refused.", ["result"], registry=None)
ALERTS = Counter(
    "decode_bench_alerts", "Regression alert deliveries (webhook or email), by result: sent, retry (a "
    "transient failure, to be retried or given up) or failed (refused for good, or given up after its retries).",
    ["result"], registry=None)

# Every known result from the start, at 0: an alert on rate() sees the series before the first event.
for _counter, _label, _values in ((RUNS_REAPED, "action", ("failed", "requeued")),
                                  (FORGE_REPORTS, "result", ("ok", "retry", "refused")),
                                  (COMMIT_STATUSES, "result", ("ok", "retry", "refused")),
                                  (ALERTS, "result", ("sent", "retry", "failed"))):
    for _value in _values:
        _counter.labels(**{_label: _value})

ALL = (PHASE_SECONDS, RUNS_REAPED, WEBHOOK_DELIVERIES, FORGE_REPORTS, COMMIT_STATUSES, ALERTS)


def http_result(status: int) -> str:
    """A forge's answer in a word: ok, retry (5xx, 429) or refused (4xx)."""
    if status >= 500 or status == 429:
        return "retry"
    return "refused" if status >= 400 else "ok"
