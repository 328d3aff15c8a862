"""The package structure holds: no import circle between the packages of ``cake_core``, and no module
imports another module's private (underscore) names.

Imports are read with :mod:`ast` from every module, at the top level and inside functions: an import
inside a function is as much a dependency as one at the top. Imports under ``if TYPE_CHECKING:`` name
types for annotations only and never run, so they are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "cake_core"
PLUGINS = ROOT / "plugins"



def _modules(root: Path, package_root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*.py")):
        if ".egg-info" in str(path) or "/tests/" in str(path.relative_to(package_root.parent)):
            continue
        parts = path.relative_to(package_root.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _plugin_modules() -> Iterator[tuple[str, Path]]:
    for pyproject in sorted(PLUGINS.glob("*/*/pyproject.toml")):
        for package in sorted(p for p in pyproject.parent.iterdir() if (p / "__init__.py").exists()):
            yield from _modules(package, package)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path) -> Iterator[tuple[str, str | None]]:
    """(imported module, name or None) for every import that runs, anywhere in the module."""
    yield from _imports_in(module, path.read_text(encoding="utf-8"), path.name == "__init__.py")


def _imports_in(module: str, source: str, is_package: bool) -> Iterator[tuple[str, str | None]]:

    def walk(node: ast.AST) -> Iterator[tuple[str, str | None]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                yield from walk(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, None
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".")[: None if is_package else -1]
                    package = package[: len(package) - child.level + 1]
                    base = ".".join(package + ([base] if base else []))
                for alias in child.names:
                    yield base, alias.name
            yield from walk(child)

    yield from walk(ast.parse(source))


MODULES = dict(_modules(CORE, CORE))
ALL_MODULES = MODULES | dict(_plugin_modules())


def _unit(module: str) -> str:
    """The package a module belongs to for layering: ``cake_core.ir.sema`` -> ``cake_core.ir``; a
    module directly in ``cake_core`` is a unit of its own (``cake_core.plugins``)."""
    return ".".join(module.split(".")[:2])


def _package_graph() -> dict[str, dict[str, set[str]]]:
    """unit -> unit it imports -> the modules whose imports make that edge."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, path in MODULES.items():
        for imported, name in _imports(module, path):
            # `from cake_core import plugins` imports the module cake_core.plugins
            target = f"{imported}.{name}" if name and f"{imported}.{name}" in MODULES else imported
            if not target.startswith("cake_core.") or _unit(target) == _unit(module):
                continue
            graph.setdefault(_unit(module), {}).setdefault(_unit(target), set()).add(module)
    return graph


def _circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_scan_sees_imports_inside_functions_and_skips_type_checking() -> None:
    edges = _package_graph()
    # cake_core.plugins imports cake_core.hookspecs at the top; verify.runner imports plugins in a function
    assert "cake_core.hookspecs" in edges["cake_core.plugins"]
    assert "cake_core.verify.runner" in edges["cake_core.verify"]["cake_core.plugins"]
    # hookspecs names every interface, under TYPE_CHECKING only
    assert "cake_core.verify" not in edges.get("cake_core.hookspecs", {})


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b": {"a.x"}}, "b": {"c": {"b.y"}}, "c": {"a": {"c.z"}}, "d": {"a": {"d.w"}}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_import_circle_between_packages() -> None:
    graph = _package_graph()
    problems = []
    for circle in _circles(graph):
        edges = [
            f"  {a} -> {b} (in {', '.join(sorted(graph[a][b]))})"
            for a in circle
            for b in circle
            if b in graph.get(a, {})
        ]
        problems.append("circle between " + ", ".join(circle) + ":\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


def _private_imports() -> Iterator[tuple[str, str, str]]:
    """(importing module, imported module, private name) for every import of another module's private
    name: ``from m import _x``, or a private module ``p._m`` imported from outside its package ``p``."""
    for module, path in ALL_MODULES.items():
        yield from _private_in(module, _imports(module, path))


def _private_in(module: str, imports: Iterator[tuple[str, str | None]]) -> Iterator[tuple[str, str, str]]:
    for imported, name in imports:
        parts = imported.split(".")
        for i, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                package = ".".join(parts[:i])
                if not (module == package or module.startswith(package + ".")):
                    yield module, imported, part
        if name and name.startswith("_") and not name.startswith("__") and imported != module:
            if f"{imported}.{name}" in ALL_MODULES and module.startswith(imported + "."):
                continue  # a package's private submodule, imported within the package
            yield module, imported, name


SAMPLE = """\
from __future__ import annotations
from typing import TYPE_CHECKING
from cake_core.ir.sema import check_module, _int_value
from . import _vocab
from ._vocab import need_layout
if TYPE_CHECKING:
    from cake_core.verify.rule import _Hidden
else:
    from cake_core.loop import run


def f():
    from cake_core.runtime._child import main
    import cake_core.lower.cuda
"""


def test_the_scan_reads_every_import_that_runs() -> None:
    found = list(_imports_in("cake_core.primitives.memory", SAMPLE, is_package=False))
    assert found == [
        ("__future__", "annotations"), ("typing", "TYPE_CHECKING"), ("cake_core.ir.sema", "check_module"),
        ("cake_core.ir.sema", "_int_value"), ("cake_core.primitives", "_vocab"),
        ("cake_core.primitives._vocab", "need_layout"), ("cake_core.loop", "run"),
        ("cake_core.runtime._child", "main"), ("cake_core.lower.cuda", None),
    ]  # fmt: skip


def test_the_private_scan_tells_another_module_s_private_name_from_a_package_s_own() -> None:
    found = set(_private_in("cake_core.primitives.memory", _imports_in("cake_core.primitives.memory", SAMPLE, False)))
    assert found == {
        ("cake_core.primitives.memory", "cake_core.ir.sema", "_int_value"),
        ("cake_core.primitives.memory", "cake_core.runtime._child", "_child"),
    }


def test_no_module_imports_another_module_s_private_names() -> None:
    offenders = sorted(set(_private_imports()))
    assert not offenders, "\n".join(f"{m} imports {name} from {imported}" for m, imported, name in offenders)
