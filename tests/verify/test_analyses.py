"""The analysis cache (`cake_core.verify.analyses`): one table per checked module and plugin set, held
weakly, reached by the module's models once attached; facts and bounds verdicts kept in it."""

from __future__ import annotations

import gc
import weakref

import pytest
from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Kind
from cake_core.ir.model import CheckedModule
from cake_core.ir.sema import check_module
from cake_core.verify.analyses import Analyses, analyses, attach, for_model, plugin_set
from cake_core.verify.domain import KernelDomain
from cake_core.verify.facts import facts
from cake_core.verify.rule import RuleContext
from cake_core.verify.verdicts import Status

TEXT = """\
kernel k(x: global T[N, 64], out: global T[N])
  domain N >= 1, T in {bf16, f16}
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg v: T[R] layout rows
    store out[t * R : +R] <- v
"""

ONE = ("cake-core", "1.0")
OTHER = ("cake-core", "1.1")


def _checked(text: str = TEXT) -> CheckedModule:
    reg = plugins.registry()
    prims = {p.name: p for p in reg.values("primitives")}
    checked = check_module(parse(text, "t.cake"), prims, reg.get("targets", "h200"))
    assert checked.ok, [d.message for d in checked.diagnostics]
    return checked


def _store_verdicts(checked: CheckedModule) -> list[object]:
    out = []
    for model in checked.models.values():
        (typed,) = [t for t in model.ops if t.op.name == "store"]
        effect = next(e for e in typed.prim.effects(typed) if e.operand.kind is Kind.GLOBAL)
        out.append(KernelDomain(model).access(typed, effect))
    return out


def test_an_analysis_is_made_once_per_key() -> None:
    table = Analyses(())
    calls = []
    assert table.get("a", 1, lambda: calls.append(1) or "one") == "one"
    assert table.get("a", 1, lambda: calls.append(1) or "again") == "one"
    assert table.get("b", 1, lambda: "b") == "b"  # the name is part of the key
    assert calls == [1] and len(table) == 2


def test_a_make_that_raises_stores_nothing() -> None:
    table = Analyses(())

    def fail() -> object:
        raise ValueError("no")

    with pytest.raises(ValueError):
        table.get("a", 1, fail)
    assert table.get("a", 1, lambda: 2) == 2


def test_one_table_per_checked_module_and_plugin_set() -> None:
    a, b = _checked(), _checked()
    assert analyses(a, (ONE,)) is analyses(a, (ONE,))
    assert analyses(a, (ONE,)) is not analyses(a, (OTHER,))  # another plugin version: another table
    assert analyses(a, (ONE,)) is not analyses(b, (ONE,))


def test_tables_live_as_long_as_their_checked_module() -> None:
    checked = _checked()
    table = weakref.ref(attach(checked, (ONE,)))
    model = weakref.ref(next(iter(checked.models.values())))
    facts(model())  # something kept in the table, holding the model
    del checked
    gc.collect()
    assert table() is None and model() is None


def test_the_models_of_an_attached_module_reach_its_table() -> None:
    checked = _checked()
    model = next(iter(checked.models.values()))
    assert for_model(model) is None
    assert facts(model) is not facts(model)  # no table: computed where asked, not kept
    table = attach(checked, (ONE,))
    assert for_model(model) is table
    assert facts(model) is facts(model)
    attach(checked, (OTHER,))  # verified again with other plugins: their own table, facts made anew
    assert for_model(model) is analyses(checked, (OTHER,))
    assert facts(model) is not table.get("facts", id(model), lambda: None)


def test_a_rule_context_attaches_its_module_under_its_plugin_set() -> None:
    checked = _checked()
    model = next(iter(checked.models.values()))
    RuleContext(checked, model, plugins.registry().get("targets", "h200"), (ONE,))
    assert for_model(model) is analyses(checked, (ONE,))


def test_plugin_set_names_every_distribution_and_version() -> None:
    reg = plugins.registry()
    found = plugin_set(reg)
    assert found == tuple(sorted(found))
    assert {(p.distribution, p.version) for p in reg.plugins.values()} == set(found)


def test_bounds_verdicts_are_kept_across_specializations_of_one_plugin_set() -> None:
    checked = _checked()
    assert len(checked.models) == 2  # T=bf16 and T=f16: one fingerprint
    attach(checked, (ONE,))
    first, second = _store_verdicts(checked)
    assert first.status is Status.VIOLATED and second is first
    attach(checked, (OTHER,))
    (third, _) = _store_verdicts(checked)
    assert third == first and third is not first  # computed again for the other plugin set
