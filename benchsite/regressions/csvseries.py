"""Series from a CSV with columns series,commit,value (in order within each series)."""
from __future__ import annotations

import csv
import io
import math

REQUIRED = ("series", "commit", "value")


class SeriesCSVError(ValueError):
    """The CSV cannot be read as series (the message names the line and the problem)."""


def read_series(text: str) -> dict[str, list[tuple[str, float]]]:
    """{series name: [(commit, value), ...]} in file order; several series may interleave."""
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip() for c in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise SeriesCSVError(f"missing column(s) {', '.join(missing)}: the header must name series,commit,value "
                             f"(found {', '.join(columns) or 'no header'})")
    reader.fieldnames = columns
    series: dict[str, list[tuple[str, float]]] = {}
    for line, row in enumerate(reader, start=2):
        name, raw = (row.get("series") or "").strip(), (row.get("value") or "").strip()
        if not name:
            raise SeriesCSVError(f"line {line}: empty series name")
        try:
            value = float(raw)
        except ValueError:
            raise SeriesCSVError(f"line {line}: value {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise SeriesCSVError(f"line {line}: value {raw!r} is not a finite number")
        series.setdefault(name, []).append(((row.get("commit") or "").strip(), value))
    if not series:
        raise SeriesCSVError("no data rows")
    return series
