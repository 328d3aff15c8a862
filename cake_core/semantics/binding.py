"""A program's sizes and element types for one run of the interpreter.

The sizes and type variables of a run come from the caller, then from the shapes and storage types of
the arrays it passes (:mod:`cake_core.hostdata`); the program's and each kernel's domain must hold,
and every parameter's element type and shape must be known. The target constant ``SMS`` is the
checked module's when it was checked for a target, else the caller's (:func:`run_sms`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import element_dtype
from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.model import CheckedModule
from cake_core.ir.types import DTYPE_NAMES, DType

#: the multiprocessor count ``SMS`` a persistent kernel sees when neither the checked module (checked
#: for a target) nor the caller fixes it: small, so that each CTA loops over several tiles
DEFAULT_SMS = 2


def program_env(
    prog: n.Program, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int | str]
) -> dict[str, int | str]:
    """The program's sizes and type variables: ``sizes``, then what the input arrays' shapes and storage
    types tell; the program's domain must hold."""
    env: dict[str, int | str] = {}
    for k, v in sizes.items():
        env[k] = v if isinstance(v, str) else int(v)
    for p in prog.params:
        if p.name not in inputs or p.tier != "global":
            continue
        arr = np.asarray(inputs[p.name])
        stored = element_dtype(arr.dtype)
        if p.dtype not in DTYPE_NAMES and p.dtype not in env and stored is not None:
            env[p.dtype] = stored.value
        if arr.ndim == len(p.shape):
            for e, actual in zip(p.shape, arr.shape, strict=True):
                if isinstance(e, n.Name) and e.id not in env:
                    env[e.id] = int(actual)
    check_domain(prog.domain, env, f"program `{prog.name}`")
    return env


def run_sms(checked: CheckedModule, sms: int | None, sizes: Mapping[str, int | str]) -> int:
    """The multiprocessor count ``SMS`` of one run: ``sms``, else ``sizes["SMS"]``, else
    :data:`DEFAULT_SMS`.

    A module checked for a target was checked with the target's ``SMS`` (constants, shared-memory
    sizes and tile shapes may have been derived from it), so its runs keep that value: asking for
    another one raises :class:`ValueError` naming both, never runs silently with the target's.
    """
    asked = sms if sms is not None else sizes.get("SMS")
    fixed = next((int(m.env["SMS"]) for m in checked.models.values() if "SMS" in m.env), None)
    if fixed is None:
        return DEFAULT_SMS if asked is None else int(asked)
    if asked is not None and int(asked) != fixed:
        raise ValueError(
            f"the run asks for SMS={int(asked)}, but the module was checked for a target with SMS={fixed} "
            "multiprocessors; check it without a target to choose `SMS` per run"
        )
    return fixed


def check_domain(domain: tuple[n.Constraint, ...], env: Mapping[str, Any], what: str) -> None:
    """Every constraint of ``domain`` holds at ``env``, else a :class:`~cake_core.errors.CakeUserError`."""
    for c in domain:
        if c.var not in env:
            raise CakeUserError(f"{what} needs the size `{c.var}`")
        v = env[c.var]
        if c.op == "in":
            allowed = [x.id if isinstance(x, n.Name) else evaluate(x, env) for x in c.values]
            if v not in allowed:
                raise CakeUserError(f"{what}: `{c.var}` = {v} is outside its domain {{{', '.join(map(str, allowed))}}}")
        elif c.op in (">=", "<="):
            bound = evaluate(c.values[0], env)
            if (v < bound) if c.op == ">=" else (v > bound):  # type: ignore[operator]
                raise CakeUserError(f"{what}: `{c.var}` = {v} violates `{c.var} {c.op} {bound}`")
        elif c.op == "%":
            m = evaluate(c.values[0], env)
            if m and v % m:  # type: ignore[operator]
                raise CakeUserError(f"{what}: `{c.var}` = {v} is not a multiple of {m}")


def element_type(name: str, env: Mapping[str, Any], what: str) -> DType:
    """The element type ``name`` (a type variable resolved by ``env``) of ``what``."""
    resolved = env.get(name, name) if name not in DTYPE_NAMES else name
    if resolved not in DTYPE_NAMES:
        raise CakeUserError(f"the element type `{name}` of `{what}` is not given (pass it in `sizes`)")
    return DType(resolved)


def shape_of(shape: tuple[n.Expr, ...], env: Mapping[str, Any], what: str) -> tuple[int, ...]:
    """The declared ``shape`` of ``what`` at ``env``."""
    out = []
    for e in shape:
        try:
            out.append(int(evaluate(e, env)))
        except EvalError as exc:
            raise CakeUserError(f"the shape of `{what}` needs {exc}") from None
    return tuple(out)
