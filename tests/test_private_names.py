"""No module of runners/ or benchsite/ uses another module's private (`_name`) names: not by
`from X import _name`, not as `X._name` on an imported module X. An idea that a second module
needs gets one public owner. Dunders are fine; only our own modules count; tests are out of scope."""
import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runners", "benchsite")


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@lru_cache(maxsize=None)
def is_ours(dotted: str) -> bool:
    """DOTTED names a module (or package) of runners/ or benchsite/."""
    path = ROOT.joinpath(*dotted.split("."))
    return dotted.split(".")[0] in PACKAGES and (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file())


def _source_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute name of the module a `from ... import` reads, relative imports resolved."""
    if not node.level:
        return node.module
    parts = package.split(".")
    parts = parts[:len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def _dotted(node: ast.expr) -> list[str] | None:
    """['a', 'b', 'c'] for the expression a.b.c; None for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return [node.id, *reversed(names)] if isinstance(node, ast.Name) else None


def private_uses(source: str, module: str, is_package: bool = False) -> set[str]:
    """'owner.name' for each private name of another of our modules that SOURCE (the text of
    MODULE) imports or reads as an attribute of an imported module."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    modules, found = {}, set()  # modules: the local name bound to one of our modules -> its name
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]  # `import a.b` binds a
                modules[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            owner = _source_module(node, package)
            for alias in node.names:
                if is_private(alias.name) and is_ours(owner):
                    found.add(f"{owner}.{alias.name}")
                if is_ours(f"{owner}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{owner}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            names = _dotted(node.value)
            if names and names[0] in modules:
                owner = ".".join([modules[names[0]], *names[1:]])
                if owner != module and is_ours(owner):
                    found.add(f"{owner}.{node.attr}")
    return found


def all_private_uses() -> set[tuple[str, str]]:
    uses = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            source = path.read_text(encoding="utf-8")
            uses.update((module, use) for use in private_uses(source, module, path.name == "__init__.py"))
    return uses


def test_no_module_uses_another_modules_private_names():
    uses = all_private_uses()
    assert uses == set(), "private names used from another module (give each a public owner)"


def test_imports_and_attributes_of_our_modules_are_found_and_the_rest_is_not():
    source = """
from benchsite.bench.lifecycle.dispatch import _hidden, runs_release
from .progress import _late
from os.path import _private_of_the_stdlib
from . import results
import runners.builder.overlay as overlay
import benchsite.bench.pages
results._kept(); overlay._farm(); benchsite.bench.domain.chart_series._rows()
results.__name__; overlay.__file__; _own(); self_object._attribute
"""
    assert private_uses(source, "benchsite.bench.lifecycle.complete") == {
        "benchsite.bench.lifecycle.dispatch._hidden", "benchsite.bench.lifecycle.progress._late",
        "benchsite.bench.lifecycle.results._kept", "runners.builder.overlay._farm",
        "benchsite.bench.domain.chart_series._rows"}


def test_a_module_may_use_its_own_private_names():
    source = "import benchsite.bench.lifecycle.dispatch as me\nme._hidden()\n"
    assert private_uses(source, "benchsite.bench.lifecycle.dispatch") == set()
