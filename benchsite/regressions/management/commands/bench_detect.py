"""Run the service's change-point detector on a CSV (columns series,commit,value), each series alone.

    python manage.py bench_detect history.csv --direction higher --json
    python manage.py bench_detect history.csv --direction higher --metric decode_tok_s --json

With --metric, each series is judged by the service's rule for that metric (its floor and the
noise measured in that series, regressions.detect.sensitivity); --min-change sets the smallest change
for every series instead; with neither, every significant change is reported.
"""
import json
import sys

from django.core.management.base import BaseCommand, CommandError

from benchsite.regressions.detect import edivisive, sensitivity
from benchsite.regressions.csvseries import SeriesCSVError, read_series
from runners import contract


def describe(points, cps, direction: str) -> list[dict]:
    out = []
    for cp in cps:
        worse = cp.after < cp.before if direction == "higher" else cp.after > cp.before
        out.append({"index": cp.index, "commit": points[cp.index][0], "previous_commit": points[cp.index - 1][0],
                    "before": cp.before, "after": cp.after, "change": cp.change, "pvalue": cp.pvalue,
                    "kind": "regression" if worse else "improvement"})
    return out


def _min_change(points, metric: str | None, given: float | None) -> float:
    """--min-change; else the rule's bound for METRIC with the series' own noise; else 0."""
    if given is not None:
        return given
    if metric is None:
        return 0.0
    return sensitivity.bound(metric, noise=sensitivity.noise_estimate(points)).relative


class Command(BaseCommand):
    help = "Detect change points (E-Divisive means, deterministic) in each series of a CSV: series,commit,value."

    def add_arguments(self, parser):
        parser.add_argument("csv", help="CSV file with columns series,commit,value ('-' reads stdin)")
        parser.add_argument("--direction", choices=["higher", "lower"], required=True, help="which way is better")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--min-size", type=int, default=edivisive.DEFAULT_MIN_SIZE,
                            help="shortest segment (default %(default)s): a spike shorter than this is no change")
        parser.add_argument("--max-pvalue", type=float, default=edivisive.DEFAULT_MAX_PVALUE)
        parser.add_argument("--min-change", type=float, default=None,
                            help="smallest relative change reported (0.03 = 3%%); default: the rule of --metric, else 0")
        parser.add_argument("--metric", help="judge each series by the service's rule for this metric (e.g. "
                                             "decode_tok_s): its floor and the series' own noise")

    def handle(self, *args, **opts):
        try:
            text = sys.stdin.read() if opts["csv"] == "-" else open(opts["csv"], encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {opts['csv']}: {exc}") from None
        if opts["min_size"] < 2:
            raise CommandError("--min-size must be at least 2")
        if opts["min_change"] is not None and not 0 <= opts["min_change"] < 1:
            raise CommandError(f"--min-change must be a relative change from 0 to below 1 (0.03 = 3%), "
                               f"not {opts['min_change']}")
        if opts["metric"] is not None:
            try:
                contract.check_judged_metric(opts["metric"], "--metric")
            except contract.ContractError as exc:
                raise CommandError(str(exc)) from None
        try:
            series = read_series(text)
        except SeriesCSVError as exc:
            raise CommandError(f"{opts['csv']}: {exc}") from None
        result = {}
        for name, points in series.items():
            cps = edivisive.detect([v for _, v in points], min_size=opts["min_size"], max_pvalue=opts["max_pvalue"],
                                   min_change=_min_change(points, opts["metric"], opts["min_change"]))
            result[name] = {"points": len(points), "change_points": describe(points, cps, opts["direction"])}
        if opts["json"]:
            self.stdout.write(json.dumps({"series": result}, indent=2))
            return
        for name, found in result.items():
            self.stdout.write(f"{name}: {found['points']} points, {len(found['change_points'])} change point(s)")
            for cp in found["change_points"]:
                change = f"{cp['change'] * 100:+.1f}%" if cp["change"] is not None else "n/a"
                self.stdout.write(f"  index {cp['index']} commit {cp['commit'] or '?'}: {cp['before']:.4g} -> "
                                  f"{cp['after']:.4g} ({change}, {cp['kind']}, p={cp['pvalue']:.2g})")
