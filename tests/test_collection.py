"""Every test file on disk is collected. pytest's default `norecursedirs` skips any directory
named `build` (or `dist`, `venv`, ...): tests/build's 30 tests once ran in no CI pass for that
reason, silently. This checks the suite's own reach."""
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_file_is_collected():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", str(TESTS)], capture_output=True, text=True, cwd=TESTS.parent, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    on_disk = {str(p.relative_to(TESTS.parent)) for p in TESTS.rglob("test_*.py")}
    assert on_disk - collected == set(), "test files that pytest never collects"
