"""Every BENCH_* variable the code reads is in a table of docs/configuration.md, and every variable
in its tables is read: runners/ (runners/config.py), benchsite/ (the typed settings,
benchsite/config/), the Makefile and the scripts. The page is generated from the typed settings
and the runners' VARIABLES, and it is not stale."""
import re
from pathlib import Path

from benchsite.config import reference

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / reference.PAGE

# A read: a setting's declaration (`env("BENCH_X", ...)`), a typed reader, a mapping lookup or
# os.getenv with a literal name; in make and shell, an expansion or a default assignment.
PY_READ = re.compile(r"""(?:\benv(?:_\w+)?|\.get|\bgetenv|\braw_value)\(\s*["'](BENCH_\w+)["']"""
                     r"""|(?:environ|\benv)\[\s*["'](BENCH_\w+)["']\s*\]""")
SHELL_READ = re.compile(r"\$[({]?(BENCH_\w+)|^\s*(?:export\s+)?(BENCH_\w+)\s*\??=", re.M)
TABLE_NAME = re.compile(r"`(BENCH_\w+)`")


def code_reads() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    sources = [*(ROOT / "runners").rglob("*.py"), *(ROOT / "benchsite").rglob("*.py")]
    shell = [ROOT / "Makefile", *(ROOT / ".ci").glob("*"), *(ROOT / "scripts").glob("*")]
    for path, pattern in [*((p, PY_READ) for p in sources), *((p, SHELL_READ) for p in shell if p.is_file())]:
        for match in pattern.finditer(path.read_text(errors="replace")):
            found.setdefault(match.group(1) or match.group(2), set()).add(str(path.relative_to(ROOT)))
    return found


def documented_names(page: Path = PAGE) -> set[str]:
    """The names in the first column of PAGE's tables."""
    names = set()
    for line in page.read_text().splitlines():
        if line.startswith("| `"):
            names |= set(TABLE_NAME.findall(line.split("|")[1]))
    return names


def test_the_subsystem_pages_tables_name_only_variables_that_are_read():
    """Pages such as security.md keep a table of their subsystem's variables beside the text: a
    variable renamed or removed must leave them too."""
    reads = set(code_reads())
    stale = {page.name: sorted(documented_names(page) - reads) for page in (ROOT / "docs").glob("*.md")}
    assert {page: names for page, names in stale.items() if names} == {}


def test_every_variable_read_is_documented_and_every_documented_one_is_read():
    reads, documented = code_reads(), documented_names()
    undocumented = {name: sorted(where) for name, where in reads.items() if name not in documented}
    assert undocumented == {}, ("declare these in benchsite/config/ (web side) or runners.config.VARIABLES "
                                f"(runners), then: {reference.COMMAND}")
    assert sorted(documented - set(reads)) == [], f"the page documents variables that nothing reads: {reference.COMMAND}"


def test_the_page_is_generated_from_the_settings():
    assert PAGE.read_text() == reference.render(), f"docs/configuration.md is stale: {reference.COMMAND}"


def test_the_scan_finds_both_sides():
    """The patterns above still see the places settings are read (a guard on the scan)."""
    reads = code_reads()
    assert "runners/config.py" in reads["BENCH_PROBE_TIMEOUT_S"]
    assert "benchsite/config/workers.py" in reads["BENCH_HEARTBEAT_INTERVAL_S"]
    assert "Makefile" in reads["BENCH_TINY_MODEL_DIR"]
    assert len(reads) >= 60
