"""The documentation is a reference a newcomer can follow inside the repository.

- Every relative link in README.md and docs/**/*.md points at a file or folder that exists,
  and a `#anchor` at a heading of the target page.
- No file outside docs/journal/ cites the design notes or engine notes that live outside the
  repository: what the code relies on from them is written in docs/ (engine-notes.md,
  reference-figures.md).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOURNAL = ROOT / "docs" / "journal"
# Spelled in pieces so that this file does not cite them itself.
DESIGN_WORD = "DES" + "IGN"
OUTSIDE_CITATIONS = re.compile("|".join([DESIGN_WORD + r"\.md", rf"\b{DESIGN_WORD}\b", "ENGINE" + "-NOTES", r"\.\./shared/"]))
SKIP_DIRS = {".git", ".venv", "var", "__pycache__", ".pytest_cache", ".gpu-carry", "node_modules"}

INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?\1")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with inline code spans removed."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, CODE_SPAN.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(path: Path):
    """(line number, target) of every link of a Markdown file."""
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        for match in INLINE_LINK.finditer(line):
            yield number, match.group(1)
        match = REFERENCE_LINK.match(line)
        if match:
            yield number, match.group(1)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for number, target in links(path):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / unquote(file_part)).resolve()
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and dest.is_file() and unquote(anchor).lower() not in anchors(dest):
            problems.append(f"{where} (no heading #{anchor} in {dest.relative_to(root)})")
    return problems


def markdown_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def repository_files(root: Path = ROOT) -> list[Path]:
    """The files of the checkout: git's view (tracked and new, not ignored), else a walk."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, check=True, timeout=60).stdout
        names = [n for n in out.decode("utf-8", "replace").split("\0") if n]
        return [root / n for n in names if (root / n).is_file()]
    except (OSError, subprocess.SubprocessError):
        return [p for p in root.rglob("*") if p.is_file() and not SKIP_DIRS & set(p.relative_to(root).parts)]


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert broken_links(page) == []


def test_no_citation_of_documents_outside_the_repository():
    found = []
    for path in repository_files():
        if JOURNAL in path.parents or SKIP_DIRS & set(path.relative_to(ROOT).parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (screenshots, archives)
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_CITATIONS.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert found == [], "cite docs/ pages instead:\n" + "\n".join(found)


def test_the_checker_finds_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Second part, here\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/a.md#second-part-here) [self](#top) ![img](docs/missing.png)\n"
                    "[gone](docs/a.md#nowhere) `[in code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n```\n"
                    "# Top\n[web](https://example.org/x.md)\n", encoding="utf-8")
    problems = broken_links(page, root=tmp_path)
    assert [p.split(" (")[0] for p in problems] == ["README.md:1: docs/missing.png", "README.md:2: docs/a.md#nowhere"]
