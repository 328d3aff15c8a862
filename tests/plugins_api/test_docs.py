"""The plugin surface stays honest (datasette's habit): every hook in ``cake_core/hookspecs.py`` is
documented in ``docs/plugins.md`` with its exact signature and docstring, the plugin manager files
every hook under a category, and every hook has a test named ``test_hook_<hook name>...`` here."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from cake_core import hookspecs, plugins

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugins.md"
TESTS = Path(__file__).parent

#: every hook spec, in the order of hookspecs.py
HOOKS = [name for name, fn in vars(hookspecs).items() if callable(fn) and hasattr(fn, "cake_spec")]
#: the hooks that register things (each files under a category); the others observe a run
REGISTER = [h for h in HOOKS if h.startswith("cake_register_")]
# a hook's section: `### `name`` then the first ```python block under it
SECTION = re.compile(r"^### `(?P<name>cake_[a-z_]+)`\n(?P<body>.*?)(?=^#{1,3} |\Z)", re.M | re.S)
CODE = re.compile(r"^```python\n(?P<code>.*?)^```", re.M | re.S)


def _documented() -> dict[str, ast.FunctionDef]:
    """Hook name -> the function definition its documentation section shows."""
    out: dict[str, ast.FunctionDef] = {}
    for m in SECTION.finditer(DOC.read_text(encoding="utf-8")):
        code = CODE.search(m["body"])
        assert code is not None, f"the section of `{m['name']}` has no python code block"
        (fn,) = ast.parse(code["code"]).body
        assert isinstance(fn, ast.FunctionDef), f"the code block of `{m['name']}` is not one function"
        assert m["name"] not in out, f"`{m['name']}` is documented twice"
        out[m["name"]] = fn
    return out


def _spec(name: str) -> ast.FunctionDef:
    (fn,) = ast.parse(inspect.getsource(getattr(hookspecs, name))).body
    assert isinstance(fn, ast.FunctionDef)
    return fn


def _signature(fn: ast.FunctionDef) -> str:
    return f"def {fn.name}({ast.unparse(fn.args)}) -> {ast.unparse(fn.returns) if fn.returns else 'None'}"


def test_hookspecs_define_twelve_register_hooks_and_six_observer_hooks() -> None:
    assert len(REGISTER) == 12
    assert sorted(set(HOOKS) - set(REGISTER)) == sorted(plugins.OBSERVER_HOOKS) and len(plugins.OBSERVER_HOOKS) == 6


def test_the_plugin_manager_files_every_register_hook() -> None:
    assert [c.hook for c in plugins.CATEGORIES] == REGISTER
    for category in plugins.CATEGORIES:
        module, _, qualname = category.interface.partition(":")
        iface = getattr(importlib.import_module(module), qualname)
        assert isinstance(iface, type) and plugins.interface_of(category.name) is iface


def test_no_documented_hook_that_does_not_exist() -> None:
    assert sorted(_documented()) == sorted(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented_with_its_exact_signature(hook: str) -> None:
    documented = _documented().get(hook)
    assert documented is not None, f"docs/plugins.md has no `### `{hook}`` section"
    spec = _spec(hook)
    assert _signature(documented) == _signature(spec)
    # the signature as Python sees it, too (annotations stay strings: hookspecs imports them lazily)
    sig = inspect.signature(getattr(hookspecs, hook))
    assert [p.name for p in sig.parameters.values()] == [a.arg for a in documented.args.args]
    assert [p.annotation for p in sig.parameters.values()] == [ast.unparse(a.annotation) for a in documented.args.args]


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented_with_its_docstring(hook: str) -> None:
    documented = _documented()[hook]
    assert ast.get_docstring(documented) == inspect.getdoc(getattr(hookspecs, hook))


def test_provisional_interfaces_are_marked_in_the_docs() -> None:
    text = DOC.read_text(encoding="utf-8")
    for hook in REGISTER:
        provisional = "*provisional*" in (inspect.getdoc(getattr(hookspecs, hook)) or "")
        row = next(line for line in text.splitlines() if line.startswith(f"| `{hook}` |"))
        assert ("*provisional*" in row) == provisional, row


def test_the_docs_name_the_environment_variables() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"`{plugins.ALLOW_ENV}`" in text and f"`{plugins.TRACE_ENV}`" in text
    assert f"[project.entry-points.{plugins.ENTRY_POINT_GROUP}]" in text


def _test_names() -> set[str]:
    names: set[str] = set()
    for path in TESTS.glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names |= {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    return names


@pytest.mark.parametrize("hook", HOOKS)
def test_plugin_hooks_have_tests(hook: str) -> None:
    tests = _test_names()
    assert any(t == f"test_hook_{hook}" or t.startswith(f"test_hook_{hook}_") for t in tests), (
        f"no test named test_hook_{hook} in {TESTS}"
    )
