"""runners.outputs.livelog: the build's and the engine's log tails while a job runs, bounded."""
import sys
import threading
import time

import pytest

from runners.outputs.livelog import MAX_BYTES, LiveLog, tail_bytes


def test_nothing_logged_yet_is_empty(tmp_path):
    live = LiveLog()
    live.engine_log = tmp_path / "not-started.log"
    assert live.text() == ""


def test_the_build_log_then_the_engine_log_as_they_grow(tmp_path):
    live = LiveLog()
    live.build_lines.append("$ git fetch")
    assert live.text() == "$ git fetch"
    live.engine_log = tmp_path / "vllm-serve.log"
    live.engine_log.write_text("INFO starting\n")
    assert live.text() == "--- build log ---\n$ git fetch\n--- engine log ---\nINFO starting"
    with open(live.engine_log, "a") as f:
        f.write("INFO loading weights\n")
    assert live.text().endswith("INFO starting\nINFO loading weights")


def test_only_the_last_64_kb_of_whole_lines(tmp_path):
    live = LiveLog()
    live.build_lines.append("build line")
    live.engine_log = tmp_path / "vllm-serve.log"
    live.engine_log.write_text("".join(f"INFO line {i:06d} é\n" for i in range(20_000)))  # ~360 KB
    text = live.text()
    assert len(text.encode()) <= MAX_BYTES
    assert text.endswith("INFO line 019999 é") and text.startswith("INFO line ")  # a whole first line
    assert "build line" not in text  # the newest bytes win


def test_tail_bytes_cuts_at_a_line_and_never_inside_a_character():
    assert tail_bytes("short", 10) == "short"
    assert tail_bytes("aaaa\nbbbb\ncccc", 8) == "cccc"
    assert tail_bytes("ééééé", 5) == "éé"


def test_a_source_builds_output_reaches_the_live_log_while_it_runs_and_is_bounded(tmp_path, monkeypatch):
    from runners.builder import source

    monkeypatch.setattr(source, "LOG_TAIL_LINES", 3)
    live = LiveLog()
    script = "import time\nfor i in range(6):\n    print(f'compiling {i}', flush=True)\n    time.sleep(0.4)\n"
    done = []
    builder = threading.Thread(target=lambda: done.append(source._run_into_log(
        [sys.executable, "-c", script], cwd=tmp_path, log=live.build_lines, timeout_s=60)))
    builder.start()
    deadline = time.monotonic() + 30
    while "compiling 1" not in live.text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "compiling 1" in live.text() and builder.is_alive()  # seen while the command still runs
    builder.join(timeout=30)
    assert done == [(0, ["compiling 3", "compiling 4", "compiling 5"])]
    assert live.build_lines == ["compiling 3", "compiling 4", "compiling 5"]


def test_a_source_build_past_its_time_limit_is_killed(tmp_path):
    from runners.builder.errors import BuildFailure
    from runners.builder.source import _run_into_log

    with pytest.raises(BuildFailure, match="timed out after 1 s"):
        _run_into_log([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path, log=[], timeout_s=1)
