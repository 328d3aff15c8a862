"""Evaluating and rendering integer expressions of Cake IR.

Sizes, offsets and trip counts are integer expressions over constants, domain sizes, grid and loop
variables. ``/`` is floor division, ``%`` the non-negative remainder, ``cdiv(a, b)`` the ceiling
division; comparisons and ``and``/``or``/``not`` give booleans. Float literals and ``inf`` appear
only in attribute values.

Two forms evaluate alike, with the same errors: :func:`evaluate` walks an expression once;
:func:`compile_expr` turns it into a function of the environment, for expressions evaluated many
times (the interpreter's statements, the protocol's traces), and :class:`Compiled` compiles each
node once.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping

from cake_core.ir import nodes as n

Value = int | float | bool | str


class EvalError(Exception):
    """An expression could not be evaluated: a free name, or division by zero."""

    def __init__(self, message: str, expr: n.Expr) -> None:
        super().__init__(message)
        self.expr = expr


def _fdiv(a: Value, b: Value) -> Value:
    """``/``: floor division of integers, true division when either operand is a float."""
    if isinstance(a, float) or isinstance(b, float):
        return a / b  # type: ignore[operator]
    return a // b  # type: ignore[operator]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_BIN: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _fdiv, "%": operator.mod,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne,
}  # fmt: skip
BUILTINS: dict[str, tuple[int, Callable]] = {"cdiv": (2, _cdiv), "min": (2, min), "max": (2, max)}
WORDS = {"inf": math.inf}


def evaluate(e: n.Expr, env: Mapping[str, Value]) -> Value:
    """The value of ``e`` with names bound by ``env``; raises :class:`EvalError` on a free name."""
    if isinstance(e, n.Num):
        return e.value
    if isinstance(e, n.Name):
        if e.id in env:
            return env[e.id]
        if e.id in WORDS:
            return WORDS[e.id]
        raise EvalError(f"`{e.id}` has no value here", e)
    if isinstance(e, n.Unary):
        v = evaluate(e.operand, env)
        return (not v) if e.op == "not" else -v
    if isinstance(e, n.Bin):
        if e.op == "and":
            return bool(evaluate(e.left, env)) and bool(evaluate(e.right, env))
        if e.op == "or":
            return bool(evaluate(e.left, env)) or bool(evaluate(e.right, env))
        a, b = evaluate(e.left, env), evaluate(e.right, env)
        if e.op in ("/", "%") and b == 0:
            raise EvalError("division by zero", e)
        return _BIN[e.op](a, b)
    if isinstance(e, n.Call):
        if e.fn not in BUILTINS:
            raise EvalError(f"unknown function `{e.fn}`", e)
        arity, fn = BUILTINS[e.fn]
        if len(e.args) != arity:
            raise EvalError(f"`{e.fn}` takes {arity} arguments", e)
        args = [evaluate(a, env) for a in e.args]
        if e.fn == "cdiv" and args[1] == 0:
            raise EvalError("division by zero", e)
        return fn(*args)
    raise EvalError("a reference is not a number", e)


Fn = Callable[[Mapping[str, Value]], Value]


def _free(e: n.Name) -> EvalError:
    return EvalError(f"`{e.id}` has no value here", e)


def compile_expr(e: n.Expr) -> Fn:
    """``e`` as a function of an environment: ``compile_expr(e)(env) == evaluate(e, env)``, raising the
    same :class:`EvalError` (a free name, a division by zero, an unknown function) when called."""
    if isinstance(e, n.Num):
        v = e.value
        return lambda env: v
    if isinstance(e, n.Name):
        return _name(e)
    if isinstance(e, n.Unary):
        x = compile_expr(e.operand)
        if e.op == "not":
            return lambda env: not x(env)
        return lambda env: -x(env)
    if isinstance(e, n.Bin) and e.op in ("and", "or"):
        a, b = compile_expr(e.left), compile_expr(e.right)
        if e.op == "and":
            return lambda env: bool(a(env)) and bool(b(env))
        return lambda env: bool(a(env)) or bool(b(env))
    if isinstance(e, n.Bin):
        f = _BIN.get(e.op)
        if f is None:
            return _raises(KeyError(e.op))  # what evaluate raises for an operator it does not know
        return _binary(f, e, e.left, e.right)
    if isinstance(e, n.Call):
        if e.fn not in BUILTINS:
            return _raises(EvalError(f"unknown function `{e.fn}`", e))
        arity, fn = BUILTINS[e.fn]
        if len(e.args) != arity:
            return _raises(EvalError(f"`{e.fn}` takes {arity} arguments", e))
        return _binary(fn, e, *e.args)
    return _raises(EvalError("a reference is not a number", e))


def _raises(exc: Exception) -> Fn:
    def fail(env: Mapping[str, Value]) -> Value:
        raise exc

    return fail


def _name(e: n.Name) -> Fn:
    key = e.id

    def name(env: Mapping[str, Value]) -> Value:
        try:
            return env[key]
        except KeyError:
            pass
        if key in WORDS:
            return WORDS[key]
        raise _free(e)

    return name


def _leaf(e: n.Expr) -> n.Name | None:
    """``e`` when it is a name a binary operation reads in place (not a word such as ``inf``)."""
    return e if isinstance(e, n.Name) and e.id not in WORDS else None


def _binary(f: Callable[[Value, Value], Value], e: n.Expr, left: n.Expr, right: n.Expr) -> Fn:
    """``f`` of two operands, the left evaluated first. An operand that is a name or a number is read in
    place, not through a function of its own: most operands are leaves. ``f`` raising
    ``ZeroDivisionError`` is a division by zero at ``e``."""
    x, y = _leaf(left), _leaf(right)

    def error(exc: Exception, env: Mapping[str, Value]) -> EvalError:
        if isinstance(exc, ZeroDivisionError):
            return EvalError("division by zero", e)
        return _free(x if x is not None and x.id not in env else y)  # type: ignore[arg-type]

    if isinstance(right, n.Num):
        v = right.value
        if x is not None:
            kx = x.id

            def name_num(env: Mapping[str, Value]) -> Value:
                try:
                    return f(env[kx], v)
                except (KeyError, ZeroDivisionError) as exc:
                    raise error(exc, env) from None

            return name_num
        a = compile_expr(left)

        def expr_num(env: Mapping[str, Value]) -> Value:
            try:
                return f(a(env), v)
            except ZeroDivisionError as exc:
                raise error(exc, env) from None

        return expr_num
    if y is not None:
        ky = y.id
        if x is not None:
            kx = x.id

            def name_name(env: Mapping[str, Value]) -> Value:
                try:
                    return f(env[kx], env[ky])
                except (KeyError, ZeroDivisionError) as exc:
                    raise error(exc, env) from None

            return name_name
        a = compile_expr(left)

        def expr_name(env: Mapping[str, Value]) -> Value:
            u = a(env)
            try:
                return f(u, env[ky])
            except (KeyError, ZeroDivisionError) as exc:
                raise error(exc, env) from None

        return expr_name
    b = compile_expr(right)
    if x is not None:
        kx = x.id

        def name_expr(env: Mapping[str, Value]) -> Value:
            try:
                u = env[kx]
            except KeyError as exc:
                raise error(exc, env) from None
            try:
                return f(u, b(env))
            except ZeroDivisionError as exc:
                raise error(exc, env) from None

        return name_expr
    a = compile_expr(left)

    def expr_expr(env: Mapping[str, Value]) -> Value:
        try:
            return f(a(env), b(env))
        except ZeroDivisionError as exc:
            raise error(exc, env) from None

    return expr_expr


class Compiled:
    """:func:`compile_expr` once per node: keyed by the node's identity, keeping the nodes it holds
    alive. ``cache``, when given, is the dict to keep them in (one shared by analyses of one kernel)."""

    def __init__(self, cache: dict[int, tuple[n.Expr, Fn]] | None = None) -> None:
        self.cache = {} if cache is None else cache

    def __call__(self, e: n.Expr | None) -> Fn | None:
        if e is None:
            return None
        hit = self.cache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        fn = compile_expr(e)
        self.cache[id(e)] = (e, fn)
        return fn


def try_int(e: n.Expr, env: Mapping[str, Value]) -> int | None:
    """``e``'s integer value if every name in it is bound, else ``None``."""
    t = type(e)
    if t is n.Num:  # the common leaves, without raising and catching for a free name
        v = e.value  # type: ignore[attr-defined]
        return v if type(v) is int else None
    if t is n.Name:
        v = env.get(e.id)  # type: ignore[attr-defined]
        return v if type(v) is int else None
    try:
        v = evaluate(e, env)
    except EvalError:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def free_names(e: n.Expr) -> set[str]:
    return {s.id for s in n.walk_expr(e) if isinstance(s, n.Name)} | {
        s.name for s in n.walk_expr(e) if isinstance(s, n.Ref)
    }


def substitute(e: n.Expr, env: Mapping[str, n.Expr]) -> n.Expr:
    """``e`` with names replaced by expressions."""
    import attrs

    if isinstance(e, n.Name):
        return env.get(e.id, e)
    if isinstance(e, n.Unary):
        return attrs.evolve(e, operand=substitute(e.operand, env))
    if isinstance(e, n.Bin):
        return attrs.evolve(e, left=substitute(e.left, env), right=substitute(e.right, env))
    if isinstance(e, n.Call):
        return attrs.evolve(e, args=tuple(substitute(a, env) for a in e.args))
    return e


# C++ rendering ---------------------------------------------------------------------------------------

_C_PREC = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5,
           "*": 6, "/": 6, "%": 6}  # fmt: skip
_C_OP = {"and": "&&", "or": "||"}


def to_c(e: n.Expr, name: Callable[[str], str], parent: int = 0) -> str:
    """C++ text for ``e``; ``name`` maps IR names to C expressions.

    Integer ``/`` and ``%`` render as C's, which agree with floor division for the non-negative
    operands sizes and indices have.
    """
    if isinstance(e, n.Num):
        v = e.value
        if isinstance(v, float):
            if math.isinf(v):
                return "__int_as_float(0x7f800000)" if v > 0 else "(-__int_as_float(0x7f800000))"
            return f"{v!r}f"
        return str(v)
    if isinstance(e, n.Name):
        if e.id == "inf":
            return "__int_as_float(0x7f800000)"
        return name(e.id)
    if isinstance(e, n.Unary):
        inner = to_c(e.operand, name, 7)
        return f"(!{inner})" if e.op == "not" else f"(-{inner})"
    if isinstance(e, n.Bin):
        p = _C_PREC[e.op]
        s = f"{to_c(e.left, name, p)} {_C_OP.get(e.op, e.op)} {to_c(e.right, name, p + 1)}"
        return f"({s})" if p < parent else s
    if isinstance(e, n.Call):
        args = ", ".join(to_c(a, name) for a in e.args)
        return {"cdiv": f"cake_cdiv({args})", "min": f"cake_min({args})", "max": f"cake_max({args})"}[e.fn]
    raise TypeError(f"cannot render {e!r} as C")
