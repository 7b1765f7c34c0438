"""Records of the engine process groups this host started, so that engines left behind by a
killed worker are found and stopped at its next start.

The guard (guard.py) stops the engine when the runner dies, but not when the guard dies with
it (a `kill -9` of the whole tree, the OOM killer): then vLLM's engine-core lives on under
init and holds the GPU. So each Engine writes a small JSON record while its group runs:

    <RunnerConfig.engine_record_dir>/engine-<pgid>.json   (BENCH_ENGINE_RECORD_DIR)
    {"pgid", "leader_start", "owner_pid", "owner_start", "command", "started_at"}

and removes it in stop(). A record whose owner process is gone is an orphan: `orphans_reap`
stops every process still in its group (SIGTERM, a grace period, SIGKILL). Start times (the
kernel's, in clock ticks since boot) keep a reused pid from being mistaken for ours. No
folder configured: no records (a library user gets the guard only; the GPU worker's default
is <BENCH_WORK_DIR>/engines).
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from runners.engine.guard import group_members, signal_group, wait_group_gone

def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def engine_recorded(*, pgid: int, command: list[str], directory: Path | None) -> Path | None:
    """Write the record of a group this process just started in DIRECTORY; its path (None:
    records are off)."""
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    owner = os.getpid()
    record = {"pgid": pgid, "leader_start": process_start(pgid), "owner_pid": owner,
              "owner_start": process_start(owner), "command": command[:12], "started_at": time.time()}
    path = directory / f"engine-{pgid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)  # never a half-written record
    return path


def engine_forgotten(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)


def _owner_alive(record: dict) -> bool:
    start = process_start(int(record["owner_pid"]))
    return start is not None and start == record.get("owner_start")


def _our_members(record: dict) -> list[int]:
    """Live processes of the recorded group that started no earlier than its leader (a group id
    is not reused while any member lives, and a later group cannot hold older processes)."""
    pgid, leader_start = int(record["pgid"]), record.get("leader_start") or 0
    return [pid for pid, state in group_members(pgid) or []
            if state != "Z" and (process_start(pid) or 0) >= leader_start]


def orphans_reap(directory: Path | None, *, grace_s: float = 10.0, log=print) -> list[dict]:
    """Stop the engine groups in DIRECTORY whose owner is gone; return their records, each with
    `members` (how many processes were still running). Live owners' records are left alone."""
    if directory is None or not directory.is_dir():
        return []
    reaped = []
    for path in sorted(directory.glob("engine-*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if _owner_alive(record):
            continue
        members = _our_members(record)
        if members:
            pgid = int(record["pgid"])
            log(f"stopping orphaned engine group {pgid} ({len(members)} processes, owner "
                f"{record['owner_pid']} is gone): {' '.join(record.get('command', []))[:200]}")
            signal_group(pgid, signal.SIGTERM)
            if not wait_group_gone(pgid, grace_s):
                signal_group(pgid, signal.SIGKILL)
                wait_group_gone(pgid, 5.0)
        reaped.append({**record, "members": len(members)})
        path.unlink(missing_ok=True)
    return reaped
