"""Run the service's change-point detector on a CSV (columns series,commit,value), each series alone.

    python manage.py bench_detect history.csv --direction higher --json
"""
import json
import sys

from django.core.management.base import BaseCommand, CommandError

from benchsite.regressions import edivisive
from benchsite.regressions.csvseries import SeriesCSVError, read_series


def describe(points, cps, direction: str) -> list[dict]:
    out = []
    for cp in cps:
        worse = cp.after < cp.before if direction == "higher" else cp.after > cp.before
        out.append({"index": cp.index, "commit": points[cp.index][0], "previous_commit": points[cp.index - 1][0],
                    "before": cp.before, "after": cp.after, "change": cp.change, "pvalue": cp.pvalue,
                    "kind": "regression" if worse else "improvement"})
    return out


class Command(BaseCommand):
    help = "Detect change points (E-Divisive means, deterministic) in each series of a CSV: series,commit,value."

    def add_arguments(self, parser):
        parser.add_argument("csv", help="CSV file with columns series,commit,value ('-' reads stdin)")
        parser.add_argument("--direction", choices=["higher", "lower"], required=True, help="which way is better")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--min-size", type=int, default=edivisive.DEFAULT_MIN_SIZE,
                            help="shortest segment (default %(default)s): a spike shorter than this is no change")
        parser.add_argument("--max-pvalue", type=float, default=edivisive.DEFAULT_MAX_PVALUE)
        parser.add_argument("--min-change", type=float, default=0.0, help="smallest relative change reported (0.03 = 3%%)")

    def handle(self, *args, **opts):
        try:
            text = sys.stdin.read() if opts["csv"] == "-" else open(opts["csv"], encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {opts['csv']}: {exc}") from None
        if opts["min_size"] < 2:
            raise CommandError("--min-size must be at least 2")
        try:
            series = read_series(text)
        except SeriesCSVError as exc:
            raise CommandError(f"{opts['csv']}: {exc}") from None
        result = {}
        for name, points in series.items():
            cps = edivisive.detect([v for _, v in points], min_size=opts["min_size"], max_pvalue=opts["max_pvalue"],
                                   min_change=opts["min_change"])
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
