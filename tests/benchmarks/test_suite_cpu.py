"""benchmarks/suite_cpu.py: the CPU of every process a command starts, by pass and kind."""
import json
import sys

from benchmarks import suite_cpu

MAKE = {"pid": 10, "ppid": 1, "start": 1.0, "cmd": "make test", "comm": "make", "cpu": 0.1}
SQLITE = {"pid": 11, "ppid": 10, "start": 2.0, "cmd": "python -m pytest -n 2 -m not postgres_pass and not alone",
          "comm": "python", "cpu": 3.0}
WORKER = {"pid": 12, "ppid": 11, "start": 3.0, "cmd": "python -u -c import sys;exec(eval(sys.stdin.readline()))",
          "comm": "python", "cpu": 50.0}
SERVE = {"pid": 13, "ppid": 12, "start": 4.0, "cmd": "python -m vllm.entrypoints.cli.main serve /m --port 1",
         "comm": "python", "cpu": 9.0}
CORE = {"pid": 14, "ppid": 13, "start": 5.0, "cmd": "python -c from multiprocessing.spawn import spawn_main",
        "comm": "VLLM::EngineCor", "cpu": 7.0}
MIGRATE = {"pid": 15, "ppid": 12, "start": 6.0, "cmd": "python manage.py migrate --noinput", "comm": "python",
           "cpu": 5.0}


def test_each_process_is_summed_under_its_pass_and_kind():
    cpu, count = suite_cpu.summarize([MAKE, SQLITE, WORKER, SERVE, CORE, MIGRATE])
    assert cpu[("sqlite", "pytest worker")] == 50.0
    assert cpu[("sqlite", "vllm serve")] == 9.0 and cpu[("sqlite", "vllm engine core")] == 7.0
    assert cpu[("sqlite", "manage.py migrate")] == 5.0
    assert cpu[("other", "make")] == 0.1 and count[("sqlite", "pytest")] == 1


def test_a_comparison_puts_the_largest_move_first(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps({"processes": [SQLITE, WORKER, MIGRATE]}))
    new.write_text(json.dumps({"processes": [SQLITE, {**WORKER, "cpu": 51.0}, {**MIGRATE, "cpu": 1.0}]}))
    lines = suite_cpu.report(new, old).splitlines()
    assert lines[0].endswith("58.0 s of CPU in all") and lines[1].endswith("55.0 s of CPU in all")
    assert "manage.py migrate" in lines[3] and lines[3].endswith("-4.0 s")


def test_a_recording_holds_the_commands_processes_and_not_the_machines(tmp_path):
    out = tmp_path / "cpu.json"
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    assert suite_cpu.main(["record", str(out), "--", sys.executable, "-c", burn]) == 0
    processes = json.loads(out.read_text())["processes"]
    [burner] = [p for p in processes if "process_time" in p["cmd"]]
    assert 0.4 < burner["cpu"] < 2.0
    assert all(p["comm"] not in ("systemd", "init", "kthreadd") for p in processes)
    assert not [p for p in processes if p["pid"] == 1]
