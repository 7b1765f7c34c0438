"""Every test file on disk is collected. pytest's default `norecursedirs` skips any directory
named `build` (or `dist`, `venv`, ...): tests/build's 30 tests once ran in no CI pass for that
reason, silently. This checks the suite's own reach, from this session's own collection (before
`-m` or `-k` leaves files out): every test file under the paths the session was asked for."""
from pathlib import Path

from tests.conftest import COLLECTED_FILES

TESTS = Path(__file__).resolve().parent


def test_every_test_file_is_collected(pytestconfig):
    asked = [Path(pytestconfig.invocation_params.dir, arg.split("::")[0]).resolve() for arg in pytestconfig.args]
    collected = pytestconfig.stash[COLLECTED_FILES]
    assert Path(__file__) in collected  # the collection this reads is the session's own
    on_disk = {path for path in TESTS.rglob("test_*.py") if any(path.is_relative_to(a) for a in asked)}
    assert on_disk - collected == set(), "test files that pytest never collects"
