"""Properties of the IR over random valid modules: text, JSON and structural-hash round trips.

The modules come from :func:`cake_kernel_strategies.modules` (templates of real constructs, varied);
each property is checked on a bounded number of examples so the whole file stays fast.
"""

from __future__ import annotations

import attrs
from cake_kernel_strategies import declared_names, modules, noisy_text, rename
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.hashing import structural_hash
from cake_core.location import Loc
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.ir.sema import check_module
from cake_core.ir.serialize import from_json, to_json

EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _primitives() -> dict:
    reg = plugins.registry()
    return {p.name: p for p in reg.values("primitives")}


def _type_errors(module: n.Module) -> list[str]:
    checked = check_module(module, _primitives())
    return [f"{d.code} {d.primary.line}: {d.message}" for d in checked.diagnostics if d.is_error]


def _locs(node: object) -> list[Loc]:
    """Every source location in ``node``, in field order."""
    out: list[Loc] = []
    if isinstance(node, Loc):
        return [node]
    if isinstance(node, tuple):
        for x in node:
            out += _locs(x)
        return out
    if attrs.has(type(node)):
        for f in attrs.fields(type(node)):
            out += _locs(getattr(node, f.name))
    return out


def _int_literals(node: object) -> list[n.Num]:
    if isinstance(node, n.Num):
        return [node] if isinstance(node.value, int) else []
    if isinstance(node, tuple):
        return [x for item in node for x in _int_literals(item)]
    if attrs.has(type(node)) and not isinstance(node, Loc):
        return [x for f in attrs.fields(type(node)) for x in _int_literals(getattr(node, f.name))]
    return []


@EXAMPLES
@given(modules())
def test_generated_modules_are_valid(module: n.Module) -> None:
    text = print_module(module)
    assert _type_errors(parse(text, "generated.cake")) == [], text


@EXAMPLES
@given(modules())
def test_text_round_trip(module: n.Module) -> None:
    text = print_module(module)
    again = parse(text, "generated.cake")
    assert again == module, text
    assert print_module(again) == text


@EXAMPLES
@given(modules())
def test_json_round_trip_keeps_nodes_and_locations(module: n.Module) -> None:
    assert from_json(to_json(module)) == module
    parsed = parse(print_module(module), "generated.cake")
    back = from_json(to_json(parsed))
    assert back == parsed
    assert _locs(back) == _locs(parsed)
    assert back.path == parsed.path


@EXAMPLES
@given(modules(), st.integers(0, 2**32 - 1))
def test_hash_ignores_names_and_formatting(module: n.Module, seed: int) -> None:
    names = declared_names(module)
    mapping = {name: f"q{i}z" for i, name in enumerate(reversed(names))}
    renamed = rename(module, mapping)
    assert renamed != module
    assert set(declared_names(renamed)) == set(mapping.values())
    text = noisy_text(renamed, seed)
    reparsed = parse(text, "noisy.cake")
    assert reparsed == renamed, text
    assert _type_errors(reparsed) == [], text
    assert structural_hash(reparsed) == structural_hash(module)


@EXAMPLES
@given(modules(), st.data())
def test_hash_changes_when_a_constant_changes(module: n.Module, data: st.DataObject) -> None:
    before = structural_hash(module)
    k = data.draw(st.sampled_from(module.kernels))
    const = data.draw(st.sampled_from([c for c in k.consts if isinstance(c.value, n.Num)]))
    changed = attrs.evolve(const, value=n.Num(const.value.value + data.draw(st.sampled_from((-1, 1, 64)))))
    kernels = tuple(attrs.evolve(x, consts=tuple(changed if c is const else c for c in x.consts)) if x is k else x
                    for x in module.kernels)  # fmt: skip
    assert structural_hash(attrs.evolve(module, kernels=kernels)) != before
    # any other integer literal too
    literal = data.draw(st.sampled_from(_int_literals(module)))
    from cake_core.mutate.rewrite import replace

    assert structural_hash(replace(module, literal, n.Num(literal.value + 1))) != before
