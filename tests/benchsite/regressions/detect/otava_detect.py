"""Run in the throwaway Apache Otava venv (not the project venv): change points of each series on stdin."""
import json, sys
from otava.analysis import compute_change_points
series = json.load(sys.stdin)
out = {}
for name, values in series.items():
    cps, _ = compute_change_points(values, window_len=50, max_pvalue=0.001)
    out[name] = [int(c.index) for c in cps]
json.dump(out, sys.stdout)
