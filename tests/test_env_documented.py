"""Every BENCH_* variable the code reads is in a table of the README, and every variable in the
README's tables is read: runners/ (runners/config.py), benchsite/ (benchsite/settings.py), the
Makefile and the scripts."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A read: a typed reader, a mapping lookup or os.getenv with a literal name; in make and shell,
# an expansion or a default assignment.
PY_READ = re.compile(r"""(?:\benv_\w+|\.get|\bgetenv|\braw_value)\(\s*["'](BENCH_\w+)["']"""
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


def readme_table_names() -> set[str]:
    """The names in the first column of the README's tables."""
    names = set()
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("| `"):
            names |= set(TABLE_NAME.findall(line.split("|")[1]))
    return names


def test_every_variable_read_is_documented_and_every_documented_one_is_read():
    reads, documented = code_reads(), readme_table_names()
    undocumented = {name: sorted(where) for name, where in reads.items() if name not in documented}
    assert undocumented == {}, "add these to a table of README.md (variable, default, meaning)"
    assert sorted(documented - set(reads)) == [], "README documents variables that nothing reads"


def test_the_scan_finds_both_sides():
    """The patterns above still see the two places settings are read (a guard on the scan)."""
    reads = code_reads()
    assert "runners/config.py" in reads["BENCH_PROBE_TIMEOUT_S"]
    assert "benchsite/settings.py" in reads["BENCH_HEARTBEAT_INTERVAL_S"]
    assert "Makefile" in reads["BENCH_TINY_MODEL_DIR"]
    assert len(reads) >= 60
