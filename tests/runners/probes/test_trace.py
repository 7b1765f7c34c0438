"""The streamed trace reader (a profiler trace of hundreds of MB is never loaded whole):
a trace given as a file parses to the same figures as the old whole-file path (json.loads, then
every event), it is read in small pieces, and broken files still raise TraceError."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from runners.probes import trace

from .test_allreduce import CPU_FIXTURES, gpu_trace, load, write


def whole_file(path: Path) -> dict:
    """The old path: the file read and decoded whole, every event handed to the parser."""
    return trace.parse_events(trace.load_trace(path)["traceEvents"])


def streamed(path: Path) -> dict:
    r = trace.parse_trace(path)
    assert (r.pop("file"), r.pop("rank")) == (path.name, 0 if "rank0" in path.name else 1)
    return r


def with_filler(data: dict) -> dict:
    """The same trace with what a real one is mostly made of, which the stream drops: Python
    frames, unrelated ops, instant and counter events, flows, metadata."""
    ev = []
    for i, e in enumerate(data["traceEvents"]):
        ts = e.get("ts", 0)
        ev += [e, {"ph": "X", "cat": "python_function", "name": f"torch/nn/modules/module.py({i})",
                   "pid": 1, "tid": 1, "ts": ts, "dur": 1.0, "args": {"Python id": i}},
               {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 2.0,
                "args": {"Input Dims": [[4, 4], [4, 4]]}},
               {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": 1, "tid": 1, "ts": ts, "s": "t"},
               {"ph": "f", "cat": "ac2g", "id": i, "pid": 0, "tid": 7, "ts": ts, "bp": "e"},
               {"ph": "C", "name": "Memory", "pid": 1, "ts": ts, "args": {"Total Allocated": 1.5e9}}]
    return {**data, "traceEvents": ev, "deviceProperties": [{"id": 0, "name": "H200"}]}


CASES = {
    "cpu_rank0": lambda: load(CPU_FIXTURES[0]),
    "cpu_rank1": lambda: load(CPU_FIXTURES[1]),
    "gpu_eager": lambda: gpu_trace(),
    "gpu_graph": lambda: gpu_trace(graph=True),
    "gpu_by_annotation": lambda: gpu_trace(correlation=False),
    "gpu_stray": lambda: gpu_trace(stray_allreduce=True),
    "gpu_filler": lambda: with_filler(gpu_trace()),
    "cpu_filler": lambda: with_filler(load(CPU_FIXTURES[1])),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("suffix", [".pt.trace.json.gz", ".pt.trace.json"])
def test_file_parses_as_the_whole_file_path(tmp_path, case, suffix):
    data = CASES[case]()
    rank = 1 if case.endswith("rank1") or case == "cpu_filler" else 0
    path = tmp_path / f"h_rank{rank}.1{suffix}"
    raw = json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw) if suffix.endswith(".gz") else raw)
    old = whole_file(path)
    assert old["decode_steps"] >= 3  # a real case, not an empty one
    assert streamed(path) == old


def test_filler_changes_nothing(tmp_path):
    plain = streamed(write(tmp_path, gpu_trace(), "p_rank0.pt.trace.json.gz"))
    assert streamed(write(tmp_path, with_filler(gpu_trace()), "f_rank0.pt.trace.json.gz")) == plain


def test_top_level_list_and_empty_events(tmp_path):
    events = gpu_trace()["traceEvents"]
    as_list = tmp_path / "l_rank0.pt.trace.json"
    as_list.write_text("\n  " + json.dumps(events))
    assert streamed(as_list) == whole_file(as_list)
    empty = tmp_path / "e_rank0.pt.trace.json"
    empty.write_text('{"traceEvents": [], "traceName": "x"}')
    r = trace.parse_trace(empty)
    assert not r["ok"] and r["decode_steps"] == 0 and r == {**whole_file(empty), "file": empty.name, "rank": 0}


@pytest.mark.parametrize("text, why", [
    ('{"traceEvents": [{"ph": "X"}], "deviceProperties": [1, 2', "not a complete trace"),  # cut after the events
    ('{"traceEvents": []} trailing', "not a complete trace"),
    ('{"traceEvents": {"ph": "X"}}', "no traceEvents list"),
    ('{"x": 1}', "no traceEvents list"),
    ("7", "no traceEvents list"),
    ("", "not a complete trace"),
])
def test_broken_files_raise(tmp_path, text, why):
    for path, raw in ((tmp_path / "b_rank0.pt.trace.json", text.encode()),
                      (tmp_path / "b_rank0.pt.trace.json.gz", gzip.compress(text.encode()))):
        path.write_bytes(raw)
        with pytest.raises(trace.TraceError, match=why):
            trace.parse_trace(path)
        with pytest.raises(trace.TraceError, match=why):
            trace.load_trace(path)  # the old path says the same


def test_corrupt_gzip_raises(tmp_path):
    raw = bytearray(CPU_FIXTURES[0].read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = bytes(64)  # damaged in the middle, length intact
    path = tmp_path / "z_rank0.pt.trace.json.gz"
    path.write_bytes(bytes(raw))
    with pytest.raises(trace.TraceError, match="not a complete trace"):
        trace.parse_trace(path)


class _Reads:
    """A file object that records the size of every read."""

    def __init__(self, f, sizes: list):
        self.f, self.sizes = f, sizes

    def read(self, n=-1):
        data = self.f.read(n)
        self.sizes.append(len(data))
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_the_file_is_read_in_small_pieces(tmp_path, monkeypatch):
    path = write(tmp_path, with_filler(gpu_trace(steps=200)), "big_rank0.pt.trace.json.gz")
    size = len(gzip.decompress(path.read_bytes()))
    assert size > 1_000_000
    sizes: list[int] = []
    real_open = trace._open
    monkeypatch.setattr(trace, "_open", lambda p: _Reads(real_open(p), sizes))
    r = trace.parse_trace(path)
    assert r["ok"] and r["decode_steps"] == 200
    assert max(sizes) <= 64 * 1024 < size  # ijson's buffer, never the file
    assert sum(sizes) >= size  # and all of it was read: a cut file would have raised
