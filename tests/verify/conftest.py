"""Helpers of the verifier tests: registries with only the plugins a test names, and kernels from text.

Rules under test are registered in-process; the installed rule packs are left out (``CAKE_PLUGINS``
allows only the target plugin), so these tests check the framework, not a pack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from cake_core import plugins
from cake_core.hookspecs import hookimpl
from cake_core.ir.parser import parse
from cake_core.ir.model import KernelModel
from cake_core.ir.sema import check_module
from cake_core.verify.rule import Rule

TARGETS_ONLY = "nvidia-targets"


class RulePlugin:
    """An in-process plugin that registers the rules it is given."""

    def __init__(self, *rules: Rule, name: str = "test-rules") -> None:
        self.__name__ = name
        self.rules = rules

    @hookimpl
    def cake_register_rules(self, register: Callable[[Rule], None]) -> None:
        for r in self.rules:
            register(r)


@pytest.fixture
def only_targets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Entry points limited to the NVIDIA targets (no installed rule pack)."""
    monkeypatch.setenv(plugins.ALLOW_ENV, TARGETS_ONLY)
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture
def registry_with(only_targets: None) -> Callable[..., plugins.Registry]:
    """``registry_with(rule, ...)``: built-ins, the NVIDIA targets and the given rules."""

    def make(*rules: Rule) -> plugins.Registry:
        return plugins.load(extra=[RulePlugin(*rules)] if rules else [])

    return make


def models(text: str, target: str = "h200") -> list[KernelModel]:
    """Every kernel model of ``text`` (which must type-check) for ``target``."""
    reg = plugins.registry()
    prims = {p.name: p for p in reg.values("primitives")}
    checked = check_module(parse(text, "t.cake"), prims, reg.get("targets", target))
    errors = [d for d in checked.diagnostics if d.is_error]
    assert not errors, "\n".join(f"{d.code}: {d.message}" for d in errors)
    return list(checked.models.values())
