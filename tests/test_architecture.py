"""The shape of the code: no function in runners/ or benchsite/ is longer than MAX_LINES.

A function's length runs from its `def` line to its last line (decorators aside, docstring and
comments included)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runners", "benchsite")
MAX_LINES = 60


def functions(path: Path, module: str):
    """(qualified name, lines) of every function and method in PATH, nested ones included."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{child.name}"
                yield name, child.end_lineno - child.lineno + 1
                yield from walk(child, name)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}.{child.name}")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")), module)


def all_functions() -> dict[str, int]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found.update(functions(path, module))
    return found


def test_no_function_is_longer_than_60_lines():
    long = {name: lines for name, lines in all_functions().items() if lines > MAX_LINES}
    assert long == {}, f"functions over {MAX_LINES} lines (split them): {long}"


def test_no_source_or_test_folder_is_named_like_build_output():
    """pytest's default norecursedirs and packaging tools skip folders named build or dist: a
    package or a test folder with such a name goes unseen."""
    trapped = sorted(str(d.relative_to(ROOT)) for top in (*PACKAGES, "tests") for d in (ROOT / top).rglob("*")
                     if d.is_dir() and d.name in ("build", "dist"))
    assert trapped == []
