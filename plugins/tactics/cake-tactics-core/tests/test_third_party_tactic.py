"""The README's third-party tactic package, installed as a distribution and found through its entry point
(the ``install_fake`` fixture of the plugin-contract tests): it registers under its own distribution, and
its rewrites pass the verifier and the interpreter gate on schedules of two problems."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application, Tactic
from cake_core.verify.interp_gate import run_gate
from cake_core.verify.runner import verify_source

ROOT = Path(__file__).resolve().parents[4]
README = ROOT / "README.md"
PROBLEMS = ROOT / "cake_core" / "problems"


def _load_conftest():
    """The plugin-contract tests' fixtures module (for ``install_fake``)."""
    path = ROOT / "tests" / "plugins_api" / "conftest.py"
    spec = importlib.util.spec_from_file_location("plugins_api_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


install_fake = _load_conftest().install_fake


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"^## A third-party tactic package\n(.*?)(?=^## )", text, re.M | re.S)
    assert m is not None, "README.md has no section `A third-party tactic package`"
    return m[1]


def _block(lang: str) -> str:
    (code,) = re.findall(rf"^```{lang}\n(.*?)^```", _section(), re.M | re.S)
    return code


@pytest.fixture
def registry(install_fake, monkeypatch: pytest.MonkeyPatch):
    """A registry loaded afresh with the README's package installed (and forgotten afterwards)."""
    toml = _block("toml")
    name = re.search(r'^name = "(.*)"', toml, re.M)[1]
    version = re.search(r'^version = "(.*)"', toml, re.M)[1]
    entry_point, module = re.search(r'^\[project.entry-points.cake\]\n(\S+) = "(\S+)"', toml, re.M).groups()
    assert _block("python").startswith(f"# {module}.py\n")
    install_fake(name, version, entry_point, module, _block("python"))
    monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
    plugins.reset()
    yield plugins.registry()
    plugins.reset()


def test_the_readme_package_registers_its_tactic_through_its_entry_point(registry) -> None:
    reg = registry.registration("tactics", "occupancy")
    assert (reg.plugin.distribution, reg.plugin.version, reg.plugin.builtin) == ("my-tactics", "1.0.0", False)
    assert isinstance(registry.get("tactics", "occupancy"), Tactic)


@pytest.mark.parametrize(("problem", "schedule"), [("kmeans-assign", "ampere"), ("kmeans-update", "atomic")])
def test_its_rewrites_keep_the_meaning(registry, problem: str, schedule: str) -> None:
    path = PROBLEMS / problem.replace("-", "_") / "schedules" / f"{schedule}.cake"
    module = parse(path.read_text(encoding="utf-8"), str(path))
    target, tactic = registry.get("targets", "h200"), registry.get("tactics", "occupancy")
    apps = tactic.applications(module, target)
    assert apps and all(a.tactic == "occupancy" for a in apps)
    for app in apps[:3]:
        text = print_module(tactic.apply(module, target, app))
        assert verify_source(text, "rewritten.cake", target, registry).ok
        assert run_gate(registry.get("problems", problem), parse(text, "rewritten.cake"), registry).ok



def test_its_precondition_refuses_a_promise_shared_memory_cannot_keep(registry) -> None:
    """The Hopper kernel takes most of an SM's shared memory: two of its CTAs per SM are not offered, and the
    verifier refuses that rewrite (CR102)."""
    path = PROBLEMS / "kmeans_assign" / "schedules" / "hopper.cake"
    module = parse(path.read_text(encoding="utf-8"), str(path))
    target, tactic = registry.get("targets", "h200"), registry.get("tactics", "occupancy")
    keys = {a.key for a in tactic.applications(module, target)}
    assert "occupancy@centroid_norms(ctas=2)" in keys and "occupancy@assign(ctas=2)" not in keys
    refused = Application("occupancy", "assign", {"ctas": 2})
    report = verify_source(print_module(tactic.apply(module, target, refused)), "refused.cake", target, registry)
    assert "CR102" in {d.code for d in report.diagnostics if d.is_error}
