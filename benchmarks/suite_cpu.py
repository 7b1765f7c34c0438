"""Where the test suite's CPU goes: every process it starts, summed by kind and by pass.

The suite runs on two saturated cores, so its wall time follows the CPU its processes use, and
most of that is spent outside pytest's own process (engines, Celery workers, manage.py, git,
Chromium) where `--durations` cannot see it. `record` runs a command and samples /proc every
0.25 s: each process's last user + system time, its command line and its parent.
`report` sums them by kind (vllm serve, EngineCore, celery, manage.py migrate, ...) and by the
pytest pass they descend from (sqlite, postgres, alone); given a second file, it prints the
kinds that moved most between the two.

    python3 benchmarks/suite_cpu.py record var/cpu-new.json -- bash .ci/run
    python3 benchmarks/suite_cpu.py report var/cpu-new.json [var/cpu-old.json]

Only the processes started after the command are kept (the PostgreSQL server's backends among
them; not the machine's daemons). A process that lives under 0.25 s may be missed, and one's
CPU after its last sample is lost: the figures are a floor, good to compare runs measured the
same way on a quiet machine. Standard library only.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

SAMPLE_S = 0.25
HZ = os.sysconf("SC_CLK_TCK")
COMMON_TOOLS = {"git", "patch", "bash", "sh", "make", "redis-server", "uv", "apt-get", "dpkg", "tar", "g++",
                "cc1plus"}


def _read(path: str, binary: bool = False):
    with open(path, "rb" if binary else "r") as f:
        return f.read()


def _stat(pid) -> tuple[str, list[str]]:
    """A process's name and the fields of /proc/PID/stat after it (the state is fields[0])."""
    stat = _read(f"/proc/{pid}/stat")
    close = stat.rfind(")")
    return stat[stat.find("(") + 1:close], stat[close + 2:].split()


def sample(seen: dict, me: int) -> set:
    """Update SEEN ({(pid, start): record}) from /proc; return the keys alive now."""
    alive = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            comm, fields = _stat(name)
            key = (int(name), int(fields[19]) / HZ)
            record = seen.get(key)
            if record is None:
                record = seen[key] = {"pid": key[0], "start": key[1], "ppid": int(fields[1]), "cmd": "", "comm": ""}
            if not record["cmd"] or comm != record["comm"]:  # first seen, or an exec since
                record["cmd"] = _read(f"/proc/{name}/cmdline", binary=True).replace(b"\0", b" ") \
                    .decode(errors="replace")[:300]
            record["comm"] = comm
            record["cpu"] = (int(fields[11]) + int(fields[12])) / HZ
            alive.add(key)
        except (OSError, IndexError, ValueError):
            continue
    return alive


def record(out: Path, command: list[str]) -> int:
    """Run COMMAND; write every process seen meanwhile to OUT; return the command's exit code."""
    proc = subprocess.Popen(command)
    seen, done, me = {}, [], os.getpid()
    began = int(_stat(proc.pid)[1][19]) / HZ
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the command; we write what we saw
    try:
        while proc.poll() is None:
            alive = sample(seen, me)
            done.extend(seen.pop(key) for key in [k for k in seen if k not in alive])
            time.sleep(SAMPLE_S)
    finally:
        signal.signal(signal.SIGINT, previous)
    done.extend(seen.values())
    started = [p for p in done if p["start"] >= began]  # not the machine's daemons from before
    out.write_text(json.dumps({"command": command, "processes": started}))
    return proc.returncode


class Processes:
    def __init__(self, processes: list[dict]):
        self.by_pid = collections.defaultdict(list)
        for p in sorted(processes, key=lambda p: p["start"]):
            self.by_pid[p["pid"]].append(p)

    def parent(self, p: dict) -> dict | None:
        earlier = [q for q in self.by_pid.get(p["ppid"], []) if q["start"] <= p["start"]]
        return earlier[-1] if earlier else None

    def phase(self, p: dict) -> str:
        """The pytest pass P descends from, by the pass's `-m` expression (the Makefile's)."""
        for _ in range(64):
            if p is None:
                break
            cmd = p["cmd"]
            if "pytest" in cmd:
                if "postgres_pass)" in cmd:
                    return "postgres"
                if "not postgres_pass" in cmd:
                    return "sqlite"
                if "-m alone" in cmd:
                    return "alone"
            p = self.parent(p)
        return "other"


LABELS = (  # (pattern in the command line or the process name, label); the first that matches
    (r"import sys;exec\(eval\(sys\.stdin\.readline\(\)\)\)", "pytest worker"),
    (r"-m pytest", "pytest"),
    (r"EngineCor", "vllm engine core"),  # the process name is cut at 15 characters
    (r"VLLM::Worker", "vllm worker"),
    (r"vllm\.entrypoints\.cli\.main (serve|bench)", "vllm {0}"),
    (r"vllm\.model_executor\.models\.registry", "vllm model inspection"),
    (r"celery", "celery"),
    (r"gunicorn", "gunicorn"),
    (r"manage\.py (\S+)", "manage.py {0}"),
    (r"-m (runners\S*)", "{0}"),
    (r"chrom", "chromium"),
)


def kind(p: dict) -> str:
    cmd, comm = p["cmd"], p.get("comm", "")
    for pattern, label in LABELS:
        match = re.search(pattern, cmd) or re.search(pattern, comm)
        if match:
            return label.format(*match.groups())
    if comm.startswith("postgres") or cmd.startswith("postgres:"):
        return "postgres server"
    if comm in COMMON_TOOLS:
        return comm
    if "python" in cmd:
        return "python " + " ".join(cmd.split()[1:3])[:50]
    return comm or "?"


def summarize(processes: list[dict]) -> tuple[collections.Counter, collections.Counter]:
    tree = Processes(processes)
    cpu, count = collections.Counter(), collections.Counter()
    for p in processes:
        key = (tree.phase(p), kind(p))
        cpu[key] += p["cpu"]
        count[key] += 1
    return cpu, count


def report(path: Path, base: Path | None = None, top: int = 30) -> str:
    cpu, count = summarize(json.loads(path.read_text())["processes"])
    lines = [f"{path}: {sum(cpu.values()):.1f} s of CPU in all"]
    phases = collections.Counter()
    for (phase, _), seconds in cpu.items():
        phases[phase] += seconds
    lines.append("  " + ", ".join(f"{phase} {seconds:.0f} s" for phase, seconds in phases.most_common()))
    if base is None:
        for (phase, label), seconds in cpu.most_common(top):
            lines.append(f"{phase:9s} {label[:58]:58s} {seconds:8.1f} s  {count[(phase, label)]:4d} processes")
        return "\n".join(lines)
    old_cpu, old_count = summarize(json.loads(base.read_text())["processes"])
    lines.insert(0, f"{base}: {sum(old_cpu.values()):.1f} s of CPU in all")
    for key in sorted(set(cpu) | set(old_cpu), key=lambda k: -abs(cpu[k] - old_cpu[k]))[:top]:
        lines.append(f"{key[0]:9s} {key[1][:50]:50s} {old_cpu[key]:7.1f} s ({old_count[key]:3d}) -> "
                     f"{cpu[key]:7.1f} s ({count[key]:3d})  {cpu[key] - old_cpu[key]:+7.1f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record", help="run a command and record the CPU of every process")
    rec.add_argument("out", type=Path)
    rec.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    rep = sub.add_parser("report", help="sum a recording by pass and kind, or compare two")
    rep.add_argument("recording", type=Path)
    rep.add_argument("base", type=Path, nargs="?", help="an earlier recording to compare with")
    rep.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    if args.what == "record":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("record: give the command after --")
        return record(args.out, command)
    print(report(args.recording, args.base, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
