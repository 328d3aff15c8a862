"""The two forms of the one expression evaluator (`cake_core.ir.exprs`): walked and compiled agree,
values and errors alike."""

from __future__ import annotations

import itertools

import pytest

from cake_core.ir import nodes as n
from cake_core.ir.exprs import Compiled, EvalError, compile_expr, evaluate


def _exprs() -> list[n.Expr]:
    a, b, c = n.Name("a"), n.Name("b"), n.Num(3)
    out: list[n.Expr] = [n.Call("cdiv", (a, c)), n.Call("cdiv", (c, b)), n.Call("min", (a, b)),
                         n.Call("max", (b, c)), n.Unary("-", a), n.Unary("not", n.Bin("<", a, b)), n.Name("inf"),
                         n.Bin("+", n.Name("inf"), a), n.Bin("/", n.Num(1.5), b)]  # fmt: skip
    for op in ("+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "and", "or"):
        out += [n.Bin(op, n.Bin("+", a, c), b), n.Bin(op, a, b), n.Bin(op, b, n.Bin("-", a, c)),
                n.Bin(op, n.Bin("-", a, c), n.Bin("+", b, c)), n.Bin(op, a, n.Num(2))]  # fmt: skip
    return out


def _outcome(f, env):  # type: ignore[no-untyped-def]
    try:
        return "value", f(env)
    except EvalError as exc:
        return "error", str(exc), exc.expr
    except KeyError as exc:
        return "key", exc.args


@pytest.mark.parametrize("e", _exprs(), ids=repr)
def test_compiled_expressions_agree_with_the_walk(e: n.Expr) -> None:
    fn = compile_expr(e)
    for a, b in itertools.product([*range(-4, 5), None], repeat=2):
        env = {k: v for k, v in (("a", a), ("b", b)) if v is not None}
        want = _outcome(lambda env: evaluate(e, env), env)
        got = _outcome(fn, env)
        assert got == want, (a, b)
        if want[0] == "error":
            assert got[2] is want[2]  # the same node: findings point at its location


def test_a_free_name_and_a_zero_divisor_are_named() -> None:
    left = n.Bin("+", n.Name("a"), n.Num(1))
    with pytest.raises(EvalError, match="`a` has no value here") as info:
        compile_expr(left)({})
    assert info.value.expr is left.left
    div = n.Bin("%", n.Name("a"), n.Name("b"))
    with pytest.raises(EvalError, match="division by zero") as info:
        compile_expr(div)({"a": 3, "b": 0})
    assert info.value.expr is div


def test_unknown_functions_and_references_fail_when_called_not_when_compiled() -> None:
    for e in (n.Call("sqrt", (n.Num(2), n.Num(3))), n.Call("min", (n.Num(2),)), n.Ref("x")):
        fn = compile_expr(e)
        with pytest.raises(EvalError) as info:
            fn({})
        with pytest.raises(EvalError) as walked:
            evaluate(e, {})
        assert str(info.value) == str(walked.value)


def test_a_word_is_a_value_unless_the_environment_binds_the_name() -> None:
    e = n.Bin("+", n.Name("inf"), n.Num(1))
    assert compile_expr(e)({}) == evaluate(e, {}) == float("inf")
    assert compile_expr(e)({"inf": 2}) == evaluate(e, {"inf": 2}) == 3


def test_compiled_compiles_each_node_once() -> None:
    comp = Compiled()
    e = n.Bin("+", n.Name("a"), n.Num(1))
    same_value = n.Bin("+", n.Name("a"), n.Num(1))
    assert comp(e) is comp(e)
    assert comp(same_value) is not comp(e)  # keyed by identity: each node's errors point at it
    assert comp(None) is None


def test_try_int_is_an_integer_value_or_none() -> None:
    from cake_core.ir.exprs import try_int

    env = {"a": 3, "t": "bf16", "b": True, "f": 1.5}
    cases = [n.Num(2), n.Num(2.5), n.Name("a"), n.Name("t"), n.Name("b"), n.Name("f"), n.Name("free"),
             n.Name("inf"), n.Bin("*", n.Name("a"), n.Num(4)), n.Bin("/", n.Name("a"), n.Num(0)),
             n.Bin("+", n.Name("free"), n.Num(1)), n.Bin("<", n.Name("a"), n.Num(4))]  # fmt: skip
    assert [try_int(e, env) for e in cases] == [2, None, 3, None, None, None, None, None, 12, None, None, None]
