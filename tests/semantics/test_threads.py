"""Threads inside a role instance: the interpreter finds what CR125 and CR126 find statically, and lets
their near misses run clean.

Each corpus kernel of the two rules runs on small random inputs: every invalid one has a race (CS003)
at the line its expectation marks or at the access the missing ordering exposes, every valid one none.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.semantics import run_program

CORPUS = Path(__file__).parents[2] / "plugins/verifier_rules/cake-rules-core/tests/corpus"
FILES = sorted(p.relative_to(CORPUS).as_posix() for rule in ("CR125", "CR126") for p in (CORPUS / rule).glob("*.cake"))
SIZES = {"N": 128, "K": 300, "KP": 300}


@functools.cache
def _prims() -> dict:
    return {p.name: p for p in plugins.registry().values("primitives")}


def _run(name: str):
    text = (CORPUS / name).read_text()
    checked = check_module(parse(text, name), _prims())
    assert checked.ok, [str(d) for d in checked.diagnostics]
    prog = checked.module.entry
    rng = np.random.default_rng(0)
    inputs = {}
    for p in prog.params:
        if p.name in ("out", "y"):
            continue
        shape = tuple(SIZES.get(getattr(d, "id", ""), getattr(d, "value", 0)) for d in p.shape)
        inputs[p.name] = rng.standard_normal(shape).astype(np.float32)
    sizes = {k: v for k, v in SIZES.items() if any(getattr(d, "id", "") == k for p in prog.params for d in p.shape)}
    return run_program(checked, inputs, sizes, policy="sequential", sms=1)


@pytest.mark.parametrize("name", FILES)
def test_the_interpreter_agrees_with_the_rule(name: str) -> None:
    result = _run(name)
    if Path(name).name.startswith("invalid_"):
        races = result.by_code("CS003")
        assert races, result.summary()
        if name.startswith("CR125"):
            assert any("by one elected thread of its 128" in f.message for f in races), [f.message for f in races]
        else:
            assert any("not ordered after its write" in f.message for f in races), [f.message for f in races]
    else:
        assert result.ok, [str(f) for f in result.findings]
