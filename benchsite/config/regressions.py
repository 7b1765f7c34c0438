"""Regression verdicts, their confirmation by re-runs, and the hosts' health (benchsite/regressions/)."""
from .fields import Flag, Fraction, Group, env


class Regressions(Group):
    title = "Regressions"
    about = "Verdicts, confirmations and host health ([methods/sensitivity.md](methods/sensitivity.md))."

    verdict_min_history: int = env("BENCH_VERDICT_MIN_HISTORY", 3, "earlier runs a verdict needs before it says "
                                   "more than \"not enough data\"", ge=2)
    verdict_max_history: int = env("BENCH_VERDICT_MAX_HISTORY", 20, "the most earlier runs a verdict uses", ge=2)
    confirm_regressions: Flag = env("BENCH_CONFIRM_REGRESSIONS", True, "re-run a regression's commit and alert only "
                                    "when the re-runs agree")
    confirm_host_seen_h: int = env("BENCH_CONFIRM_HOST_SEEN_H", 24, "a host of the pool that finished a run this many "
                                   "hours ago takes the confirmation re-run", ge=1)
    confirm_max_runs: int = env("BENCH_CONFIRM_MAX_RUNS", 3, "re-runs one confirmation may take while they cannot "
                                "tell (one more at a time)", ge=1)
    comm_health_drift: Fraction = env("BENCH_COMM_HEALTH_DRIFT", 0.25, "a host whose allreduce latency moved more "
                                      "than this fraction (0.25 = 25%) from the median of its own latest checks is "
                                      "flagged")
    comm_health_history: int = env("BENCH_COMM_HEALTH_HISTORY", 10, "that median's earlier checks", ge=3)
